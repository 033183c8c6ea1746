//! AugSBERT's data augmentation: new target pairs sampled from the input's sentences (random or
//! BM25 or semantic-search partners), labelled by a cross-encoder (`augment`, streaming);
//! pseudo-query pairs from a corpus alone (`augment --corpus`) or real queries without judgments
//! (`--queries`); and hard-negative mining (`mine`).
mod bm25;
mod job;
pub mod mine;
mod pipeline;
mod pseudo;
mod query_pairs;
mod random;
mod semantic;

pub use bm25::Bm25;
pub use job::AugmentJob;
pub use pipeline::{augment, AugmentSpec, AugmentSummary};
pub use pseudo::{write_pseudo_pairs, write_query_pairs, PseudoPairs, PseudoSpec, PseudoSummary};
pub use query_pairs::{fuse, QueryPositives, QuerySpec};
pub use random::random_pairs;
pub use semantic::{ranking_depth, semantic_ranking, take_ranked};

use std::collections::HashSet;

/// How new pairs are drawn (`augment --sample`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Sampling {
    /// Partners drawn uniformly from the other rows' sentence2 (AugSBERT's random sampling).
    Random,
    /// Each sentence's top partners by BM25 (k1 1.2, b 0.75).
    Bm25,
    /// Each sentence's nearest partners by a bi-encoder (--model; exact cosine search).
    Semantic,
    /// Top k by BM25 and top k by the bi-encoder, together (up to 2k partners).
    #[value(name = "bm25+semantic")]
    Bm25Semantic,
    /// No new pairs: only label the input.
    None,
}

/// The dedup rules every sampler obeys: no pair of a sentence with itself, none equal to an
/// existing pair in either order, none twice.
pub struct PairFilter<'a> {
    seen: HashSet<(&'a str, &'a str)>,
}

impl<'a> PairFilter<'a> {
    /// Start from the input's own pairs.
    pub fn new(existing: impl IntoIterator<Item = (&'a str, &'a str)>) -> PairFilter<'a> {
        let mut seen = HashSet::new();
        for (a, b) in existing {
            seen.insert((a, b));
            seen.insert((b, a));
        }
        PairFilter { seen }
    }

    /// Accept (a, b) if allowed, remembering it (in both orders).
    pub fn accept(&mut self, a: &'a str, b: &'a str) -> bool {
        if a == b || self.seen.contains(&(a, b)) {
            return false;
        }
        self.seen.insert((a, b));
        self.seen.insert((b, a));
        true
    }
}

/// Distinct values in first-seen order.
pub fn distinct<'a>(values: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let mut seen = HashSet::new();
    values.into_iter().filter(|v| seen.insert(*v)).collect()
}
