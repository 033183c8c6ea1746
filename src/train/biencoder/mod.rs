//! Training a sentence encoder (sentence-transformers' SentenceTransformer.fit) with one of the
//! registry's losses; the result is a sentence-transformers folder.
mod backbone;
mod data;
mod gpu_backbone;
mod gpu_step;
mod gradcache;
mod no_duplicates;
mod plain;
mod step;
mod task;

pub use data::BiData;
pub use task::{BiEncoderOptions, BiEncoderTask, DEFAULT_MINI_BATCH};
