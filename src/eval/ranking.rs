//! Ranking metrics with sentence-transformers' names and cut-offs.
use crate::eval::Metrics;
use std::collections::HashSet;

pub const ACCURACY_AT: [usize; 4] = [1, 3, 5, 10];
pub const PRECISION_RECALL_AT: [usize; 5] = [1, 3, 5, 10, 100];
pub const MRR_AT: usize = 10;
pub const NDCG_AT: usize = 10;
pub const MAP_AT: usize = 100;

fn dcg(gains: impl Iterator<Item = f64>) -> f64 {
    gains
        .enumerate()
        .map(|(i, g)| g / ((i + 2) as f64).log2())
        .sum()
}

/// nDCG@10 of one query's ranking (binary gains), as sentence-transformers computes it.
pub fn ndcg(ranked: &[&str], relevant: &HashSet<String>) -> f64 {
    let got = dcg(ranked
        .iter()
        .take(NDCG_AT)
        .map(|d| relevant.contains(*d) as u8 as f64));
    got / dcg(std::iter::repeat_n(1.0, relevant.len().min(NDCG_AT)))
}

/// Ranking metrics over queries: `ranked[q]` holds doc ids best first (at least 100 deep where
/// the corpus allows), `relevant[q]` that query's relevant ids. Names as sentence-transformers'.
pub fn ranking_metrics(
    ranked: &[Vec<&str>],
    relevant: &[&HashSet<String>],
    prefix: &str,
) -> Metrics {
    let n = ranked.len() as f64;
    let mean = |f: &dyn Fn(&[&str], &HashSet<String>) -> f64| {
        ranked
            .iter()
            .zip(relevant)
            .map(|(r, rel)| f(r, rel))
            .sum::<f64>()
            / n
    };
    let hits = |r: &[&str], rel: &HashSet<String>, k: usize| {
        r.iter().take(k).filter(|d| rel.contains(**d)).count() as f64
    };
    let mut m = Metrics::new();
    for k in ACCURACY_AT {
        m.push((
            format!("{prefix}_accuracy@{k}"),
            mean(&|r, rel| (hits(r, rel, k) > 0.0) as u8 as f64),
        ));
    }
    for k in PRECISION_RECALL_AT {
        m.push((
            format!("{prefix}_precision@{k}"),
            mean(&|r, rel| hits(r, rel, k) / k as f64),
        ));
        m.push((
            format!("{prefix}_recall@{k}"),
            mean(&|r, rel| hits(r, rel, k) / rel.len() as f64),
        ));
    }
    m.push((
        format!("{prefix}_mrr@{MRR_AT}"),
        mean(&|r, rel| {
            r.iter()
                .take(MRR_AT)
                .position(|d| rel.contains(*d))
                .map_or(0.0, |p| 1.0 / (p + 1) as f64)
        }),
    ));
    m.push((format!("{prefix}_ndcg@{NDCG_AT}"), mean(&ndcg)));
    m.push((
        format!("{prefix}_map@{MAP_AT}"),
        mean(&|r, rel| {
            let (mut correct, mut sum) = (0.0, 0.0);
            for (rank, d) in r.iter().take(MAP_AT).enumerate() {
                if rel.contains(*d) {
                    correct += 1.0;
                    sum += correct / (rank + 1) as f64;
                }
            }
            sum / rel.len().min(MAP_AT) as f64
        }),
    ));
    m
}
