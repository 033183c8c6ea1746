//! BERT's layers in candle-nn style (one struct per HF submodule, weights by name through a
//! VarBuilder) and the models built from them: the cross-encoder, the Condenser head and the MLM
//! head; pooling, the special tokens and the sentence vectors the encoders return.
pub mod batch;
pub mod bert;
pub mod condenser;
pub mod config;
pub mod cross_encoder;
pub mod linear;
pub mod norm;
pub mod pooling;
pub mod softmax_head;
pub mod specials;
pub mod vectors;
