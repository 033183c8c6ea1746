//! AugSBERT's semantic-search sampling (SS): each distinct sentence1's nearest sentence2 values by
//! a bi-encoder (exact cosine search), under the dedup rules random sampling obeys.
use super::{distinct, PairFilter};
use crate::error::Result;
use crate::model::SentenceEncoder;
use crate::search::{search, ScoreFn};
use indicatif::ProgressBar;
use std::collections::HashMap;

/// For each distinct sentence1 (first-seen order), its `ranking_depth` nearest sentence2 values.
pub fn semantic_ranking<'a>(
    s1: &[&'a str],
    s2: &[&'a str],
    k: usize,
    encoder: &SentenceEncoder,
    batch: usize,
    progress: &ProgressBar,
) -> Result<Vec<(&'a str, Vec<&'a str>)>> {
    let (queries, pool) = (distinct(s1.iter().copied()), distinct(s2.iter().copied()));
    let depth = ranking_depth(s1, s2, k).min(pool.len());
    progress.set_length((queries.len() + pool.len()) as u64);
    let q = encoder.encode(&queries, batch, progress)?;
    let c = encoder.encode(&pool, batch, progress)?;
    let ids: Vec<String> = (0..pool.len()).map(|i| format!("{i:010}")).collect();
    let hits = search(&q, &c, &ids, ScoreFn::Cosine, depth);
    Ok(queries
        .into_iter()
        .zip(hits)
        .map(|(q, h)| (q, h.into_iter().map(|(d, _)| pool[d]).collect()))
        .collect())
}

/// How far down a ranking to keep so that `k` partners survive the dedup rules in all but
/// degenerate cases: past the sentence itself, its existing partners (either order) and pairs
/// already drawn the other way round.
pub fn ranking_depth(s1: &[&str], s2: &[&str], k: usize) -> usize {
    let mut partners: HashMap<&str, usize> = HashMap::new();
    for (a, b) in s1.iter().zip(s2) {
        *partners.entry(a).or_default() += 1;
        *partners.entry(b).or_default() += 1;
    }
    2 * k + partners.values().max().copied().unwrap_or(0) + 1
}

/// Take up to `k` partners per sentence from each ranking, in order, through one shared filter
/// (so BM25 + SS never repeats a pair either sampler already drew).
pub fn take_ranked<'a>(
    rankings: &[Vec<(&'a str, Vec<&'a str>)>],
    existing: impl IntoIterator<Item = (&'a str, &'a str)>,
    k: usize,
) -> Vec<(&'a str, &'a str)> {
    let mut filter = PairFilter::new(existing);
    let mut out = Vec::new();
    for ranking in rankings {
        for (q, ranked) in ranking {
            out.extend(
                ranked
                    .iter()
                    .filter(|c| filter.accept(q, c))
                    .take(k)
                    .map(|c| (*q, *c)),
            );
        }
    }
    out
}
