//! condenser: domain overlap, AugSBERT and Condenser pre-training for sentence encoders.
pub mod augment;
pub mod cli;
pub mod data;
pub mod encode;
pub mod error;
pub mod eval;
pub mod flags;
pub mod hash;
pub mod model;
pub mod overlap;
pub mod plot;
pub mod recipe;
pub mod runtime;
pub mod search;
pub mod settings;
pub mod shard;
pub mod study;
pub mod tokenize;
pub mod train;

pub use error::{Error, Result};
