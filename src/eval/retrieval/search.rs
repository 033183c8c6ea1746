//! Exact nearest-neighbour search over embeddings, in parallel over queries.
use super::ScoreFn;
use crate::model::Embeddings;
use rayon::prelude::*;

/// The top `k` corpus indices for each query, ordered by (-score, doc id).
pub fn search(
    q: &Embeddings,
    c: &Embeddings,
    doc_ids: &[String],
    score: ScoreFn,
    k: usize,
) -> Vec<Vec<usize>> {
    let norms = |e: &Embeddings| -> Vec<f32> {
        (0..e.len())
            .map(|i| {
                if score == ScoreFn::Cosine {
                    e.row(i)
                        .iter()
                        .map(|x| x * x)
                        .sum::<f32>()
                        .sqrt()
                        .max(1e-12)
                } else {
                    1.0
                }
            })
            .collect()
    };
    let (qn, cn) = (norms(q), norms(c));
    (0..q.len())
        .into_par_iter()
        .map(|qi| {
            let qr = q.row(qi);
            let mut hits: Vec<(f32, usize)> = (0..c.len())
                .map(|d| {
                    (
                        qr.iter().zip(c.row(d)).map(|(a, b)| a * b).sum::<f32>() / (qn[qi] * cn[d]),
                        d,
                    )
                })
                .collect();
            let order = |a: &(f32, usize), b: &(f32, usize)| {
                b.0.total_cmp(&a.0)
                    .then_with(|| doc_ids[a.1].cmp(&doc_ids[b.1]))
            };
            if hits.len() > k {
                hits.select_nth_unstable_by(k - 1, order);
                hits.truncate(k);
            }
            hits.sort_by(order);
            hits.into_iter().map(|(_, d)| d).collect()
        })
        .collect()
}
