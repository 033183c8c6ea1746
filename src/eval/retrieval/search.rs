//! Exact nearest-neighbour search over embeddings, in parallel over queries.
use super::ScoreFn;
use crate::model::Embeddings;
use rayon::prelude::*;

/// The top `k` (corpus index, score) for each query, ordered by (-score, doc id).
pub fn search(
    q: &Embeddings,
    c: &Embeddings,
    doc_ids: &[String],
    score: ScoreFn,
    k: usize,
) -> Vec<Vec<(usize, f32)>> {
    search_skipping(q, c, doc_ids, score, k, |_, _| false)
}

/// As `search`, never returning a document `skip(query, doc)` names (BEIR's identical ids, a
/// query's known positives when mining negatives).
pub fn search_skipping(
    q: &Embeddings,
    c: &Embeddings,
    doc_ids: &[String],
    score: ScoreFn,
    k: usize,
    skip: impl Fn(usize, usize) -> bool + Sync,
) -> Vec<Vec<(usize, f32)>> {
    let norms = |e: &Embeddings| -> Vec<f32> {
        (0..e.len())
            .map(|i| match score {
                ScoreFn::Cosine => e
                    .row(i)
                    .iter()
                    .map(|x| x * x)
                    .sum::<f32>()
                    .sqrt()
                    .max(1e-12),
                ScoreFn::Dot => 1.0,
            })
            .collect()
    };
    let (qn, cn) = (norms(q), norms(c));
    (0..q.len())
        .into_par_iter()
        .map(|qi| {
            let qr = q.row(qi);
            let mut hits: Vec<(usize, f32)> = (0..c.len())
                .filter(|&d| !skip(qi, d))
                .map(|d| {
                    let dot = qr.iter().zip(c.row(d)).map(|(a, b)| a * b).sum::<f32>();
                    (d, dot / (qn[qi] * cn[d]))
                })
                .collect();
            let order = |a: &(usize, f32), b: &(usize, f32)| {
                b.1.total_cmp(&a.1)
                    .then_with(|| doc_ids[a.0].cmp(&doc_ids[b.0]))
            };
            if hits.len() > k {
                hits.select_nth_unstable_by(k - 1, order);
                hits.truncate(k);
            }
            hits.sort_by(order);
            hits
        })
        .collect()
}
