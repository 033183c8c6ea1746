//! Training a sentence encoder (sentence-transformers' SentenceTransformer.fit) with one of the
//! registry's losses; the result is a sentence-transformers folder.
mod card;
mod data;
mod engine_step;
mod gpu_ranking;
mod gpu_step;
mod gradcache;
mod no_duplicates;
mod step;
mod task;

pub use data::BiData;
pub use task::{BiEncoderOptions, BiEncoderTask, DEFAULT_MINI_BATCH};
