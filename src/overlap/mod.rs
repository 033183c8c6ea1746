//! Domain overlap (Pinecone, "Domain Transfer with BERT"): WordPiece n-gram sets per dataset and
//! their pairwise Jaccard similarity, exact or by MinHash.
mod compute;
mod exact;
mod minhash;
mod ngrams;
mod options;
mod parts;
mod report;
mod shard;

pub use compute::{compute, compute_parts, compute_texts, total_rows};
pub use exact::{shared_matrix, NgramSet};
pub use minhash::{standard_error, MinHasher, Sketch};
pub use ngrams::NgramPacker;
pub use options::{Mode, Options, Source};
pub use parts::{merge_parts, Parts};
pub use report::{Approx, OverlapReport};
pub use shard::{compute_shard, shard_settings};
