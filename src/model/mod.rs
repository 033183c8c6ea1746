//! The model, in five floors that import downwards only (tests/import_order.rs): `kernels`
//! (matmul libraries, fused ops with their own backward), `layers` (BERT and its heads as candle
//! modules), `engine` (BERT's packed forward and backward on the CPU, from the layers' weights),
//! `encoder` (the sentence encoder, which runs the engine where it can and the layers elsewhere)
//! and `folders` (HF and sentence-transformers folders on disk).
pub mod encoder;
pub mod engine;
pub mod folders;
pub mod kernels;
pub mod layers;

pub use encoder::{CrossEncoderModel, SentenceEncoder};
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
pub use layers::cross_encoder::{CrossEncoder, PairTokenizer};
pub use layers::linear::Linear;
pub use layers::norm::LayerNorm;
pub use layers::pooling::{l2_normalize, Pooling, PoolingMode};
pub use layers::specials::Specials;
pub use layers::vectors::Embeddings;
