//! The model: BERT in candle, pooling, and model folders (HF and sentence-transformers).
mod batch;
mod bert;
pub mod blas;
pub mod condenser;
mod config;
pub mod cross_encoder;
pub mod dropout;
mod encoder;
mod folder;
pub mod gelu;
mod linear;
pub mod matmul;
pub mod ops;
mod pooling;
pub mod save;
mod softmax;

pub use batch::TokenBatch;
pub use bert::{attention_bias, Bert, BertEmbeddings, BertLayer, SelfAttention};
pub use config::BertConfig;
pub use cross_encoder::{CrossEncoder, PairTokenizer};
pub use dropout::Dropout;
pub use encoder::{Embeddings, SentenceEncoder, Specials};
pub use folder::ModelFolder;
pub use linear::Linear;
pub use matmul::matmul;
pub use pooling::{l2_normalize, Pooling};
pub use softmax::masked_softmax;
