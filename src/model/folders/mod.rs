//! Model folders on disk: HF BERT and sentence-transformers folders read (config, tokenizer,
//! modules.json, pooling, weights), models loaded from them for inference with the user's
//! overrides, and every folder condenser writes.
pub mod card;
pub mod folder;
pub mod home;
pub mod inference;
pub mod interpolate;
pub mod load;
pub mod save;
pub mod weights;
