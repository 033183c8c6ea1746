//! CachedMultipleNegativesRankingLoss: MNR's loss (20 x cosine, in-batch negatives plus any hard
//! negatives) with GradCache's backward (train/biencoder/gradcache.rs), so the batch, and with it
//! the number of negatives, can grow past what one forward pass fits in memory.
use super::{mnr::Mnr, LossSpec};

pub const SPEC: LossSpec = LossSpec {
    name: "cached-mnr",
    help: "CachedMultipleNegativesRankingLoss: MNR over the whole batch, embedded --mini-batch-size rows at a time (GradCache)",
    columns: "anchor,positive,negative?",
    more_texts: true,
    per_example: false,
    cached: true,
    ranking: Some(super::mnr::RANKING),
    build: |_| Ok(Box::new(Mnr)),
    ..LossSpec::BASE
};
