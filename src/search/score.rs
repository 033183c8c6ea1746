//! How a query scores a document and how scored documents are ordered, shared by exact search,
//! the indexes' exact rescoring and the stored-vector search, so that every path ranks alike:
//! by (-score, document), equal scores kept in the caller's document order.
use crate::error::{Error, Result};
use std::cmp::Ordering;

/// How a query scores a document (`--score-fn`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ScoreFn {
    #[default]
    Cosine,
    Dot,
}

impl ScoreFn {
    pub const ALL: [ScoreFn; 2] = [ScoreFn::Cosine, ScoreFn::Dot];

    pub fn name(self) -> &'static str {
        match self {
            ScoreFn::Cosine => "cosine",
            ScoreFn::Dot => "dot",
        }
    }
}

/// Each row's norm as `score` divides by it (1 for the dot product).
pub(super) fn norms(e: &[f32], dim: usize, score: ScoreFn) -> Vec<f32> {
    e.chunks(dim)
        .map(|r| match score {
            ScoreFn::Cosine => r.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12),
            ScoreFn::Dot => 1.0,
        })
        .collect()
}

/// One query's score of one document, as `TopK` computes it (the dot product over both norms for
/// the cosine).
pub fn score_pair(score: ScoreFn, q: &[f32], d: &[f32]) -> f32 {
    let dot: f32 = q.iter().zip(d).map(|(a, b)| a * b).sum();
    let n = |v: &[f32]| norms(v, v.len().max(1), score)[0];
    dot / (n(q) * n(d))
}

/// Best first: higher score, then `tie` (the document order).
pub(super) fn order(
    tie: &impl Fn(usize, usize) -> Ordering,
) -> impl Fn(&(usize, f32), &(usize, f32)) -> Ordering + '_ {
    move |a, b| b.1.total_cmp(&a.1).then_with(|| tie(a.0, b.0))
}

/// The best `k` of scored candidates, ordered as exact search orders them.
pub fn best(
    mut list: Vec<(usize, f32)>,
    k: usize,
    tie: &impl Fn(usize, usize) -> Ordering,
) -> Vec<(usize, f32)> {
    list.sort_by(order(tie));
    list.truncate(k);
    list
}

/// Err unless the indexes' cosine ranking is `score`'s: a dot product over vectors that are not
/// unit length would rank otherwise, and an index would propose the wrong candidates.
pub fn ranks_like(score: ScoreFn, normalized: bool) -> Result<()> {
    match score == ScoreFn::Dot && !normalized {
        true => Err(Error::msg(
            "the index finds candidates by cosine, and these vectors are not unit length: \
             search by dot product without --index",
        )),
        false => Ok(()),
    }
}
