//! The model, in three floors that import downwards only: `kernels` (matmul libraries, fused ops
//! with their own backward), `layers` (BERT and the models built on it) and `folders` (HF and
//! sentence-transformers folders on disk).
pub mod engine;
pub mod folders;
pub mod kernels;
pub mod layers;

pub use folders::folder::ModelFolder;
pub use folders::inference::{InferenceOptions, Loaded};
pub use kernels::dropout::{Dropout, DropoutRates};
pub use kernels::matmul::matmul;
pub use kernels::max_abs_diff;
pub use kernels::precision::Precision;
pub use kernels::softmax::masked_softmax;
pub use layers::batch::TokenBatch;
pub use layers::bert::{attention_bias, Bert, BertEmbeddings, BertLayer, SelfAttention};
pub use layers::config::{Activation, BertConfig};
pub use layers::cross_encoder::{CrossEncoder, CrossEncoderModel, PairTokenizer};
pub use layers::encoder::{Embeddings, SentenceEncoder, Specials};
pub use layers::linear::Linear;
pub use layers::norm::LayerNorm;
pub use layers::pooling::{l2_normalize, Pooling, PoolingMode};
