//! Hard-negative mining for (anchor, positive) pairs, as sentence-transformers'
//! `mine_hard_negatives` defines it: distinct anchors against a distinct-text corpus (the given
//! corpus plus every positive); candidates by the bi-encoder (exact cosine search) and/or BM25;
//! every known positive of the anchor skipped; optional cross-encoder rescoring with max/min-score
//! and absolute/relative margin filters (against the anchor's hardest positive) that remove
//! likely false negatives; ranks [range_min, range_max); top or seeded random sampling.
mod candidates;
mod job;
mod miner;
mod options;
mod output;
mod source;

pub use job::{MineJob, MineSummary};
pub use miner::{mine, MineInput, MineStats, Mined, MinedAnchor, MinedBlocks, BLOCK};
pub use options::{Candidates, MineOptions, MinedFormat, Miners, NegativeSampling};
pub use output::mined_batch;
pub use source::{MineSource, MineTexts};
