//! Nearest-neighbour search, one room for every caller (evaluation, mining, semantic sampling, the
//! `search` and `index` commands): exact top-k by GEMM over a corpus in memory or streamed from
//! its store; the store of embeddings `encode` writes (its format and how the vectors were made,
//! shard folders read in order); the approximate indexes (an IVF with spherical k-means lists and
//! second lists, usearch's HNSW graph), their build with checkpoints and resume, their calibrated
//! breadth and their description; and the content fingerprint that ties an index or a shard's run
//! to the vectors it read. Below eval and augment, above model (vectors, BLAS) and data (files).
mod ann;
mod build;
mod calibrate;
mod corpus;
mod description;
mod exact;
mod fingerprint;
mod hnsw;
mod ivf;
mod kmeans;
mod queries;
mod score;
mod settings;
mod store;
mod stream;

pub use ann::AnnIndex;
pub use build::{build_index, BuildSummary};
pub use calibrate::Calibration;
pub use corpus::{indexed_corpus, IndexedCorpus, StoredCorpus};
pub use description::{default_index_path, open_index, IndexInfo, SecondLists};
pub use exact::{search, search_skipping, TopK, DOC_BLOCK};
pub use fingerprint::with_inputs;
pub use queries::Queries;
pub use score::{best, ranks_like, score_pair, ScoreFn};
pub use settings::{
    Breadth, HnswSettings, IndexSettings, Quantization, DEFAULT_EF_SEARCH, DEFAULT_PROBES,
};
pub use store::{EmbeddingsMeta, StoredEmbeddings, META_KEY};
pub use stream::{search_stored, SearchSummary, Wanted, QUERY_BLOCK};
