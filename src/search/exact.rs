//! Exact nearest-neighbour search that streams the corpus: each block of documents is scored
//! against every query by one BLAS GEMM (queries in chunks), and each query keeps only its best k
//! in a bounded buffer. Memory is the queries, their top lists and one block of scores, whatever
//! the corpus size; the result equals a full sort of every score (tests/stored_search.rs).
use super::score::{norms, order, ScoreFn};
use crate::error::{Error, Result};
use crate::model::kernels::blas::{blas, NO_TRANS, TRANS};
use crate::model::Embeddings;
use rayon::prelude::*;
use std::cmp::Ordering;

/// Documents scored per GEMM: 4,096 x 1,024 queries of scores is 16 MB.
pub const DOC_BLOCK: usize = 4096;
const QUERY_CHUNK: usize = 1024;

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
    let tie = |a: usize, b: usize| doc_ids[a].cmp(&doc_ids[b]);
    let mut top = TopK::new(q.clone(), score, k);
    for start in (0..c.len()).step_by(DOC_BLOCK) {
        let end = (start + DOC_BLOCK).min(c.len());
        let block = &c.data[start * c.dim..end * c.dim];
        top.add(start, block, &skip, &tie)
            .expect("query and corpus embeddings share their width");
    }
    top.finish(&tie)
}

/// Each query's best `k` so far, fed block by block.
pub struct TopK {
    queries: Embeddings,
    query_norms: Vec<f32>,
    score: ScoreFn,
    k: usize,
    /// Per query: candidates (doc, score), pruned to the best k when they reach 2k.
    lists: Vec<Vec<(usize, f32)>>,
    /// Per query: the k-th best score once k are kept (a lower score can never enter).
    floor: Vec<f32>,
    scores: Vec<f32>,
}

impl TopK {
    pub fn new(queries: Embeddings, score: ScoreFn, k: usize) -> TopK {
        let n = queries.len();
        TopK {
            query_norms: norms(&queries.data, queries.dim.max(1), score),
            queries,
            score,
            k,
            lists: vec![Vec::new(); n],
            floor: vec![f32::NEG_INFINITY; n],
            scores: Vec::new(),
        }
    }

    /// Score documents `first ..` (`block`: their embeddings, row after row) against every query
    /// and keep each query's best; `tie` orders equal scores (by document index).
    pub fn add(
        &mut self,
        first: usize,
        block: &[f32],
        skip: &(impl Fn(usize, usize) -> bool + Sync),
        tie: &(impl Fn(usize, usize) -> Ordering + Sync),
    ) -> Result<()> {
        let dim = self.queries.dim;
        if dim == 0 || !block.len().is_multiple_of(dim) {
            return Err(Error::msg(format!(
                "search: document vectors are not {dim} wide like the queries"
            )));
        }
        let docs = block.len() / dim;
        let nq = self.queries.len();
        if docs == 0 || nq == 0 || self.k == 0 {
            return Ok(());
        }
        let doc_norms = norms(block, dim, self.score);
        let b = blas().ok_or_else(|| Error::msg("search needs a BLAS (none was loaded)"))?;
        for q0 in (0..nq).step_by(QUERY_CHUNK) {
            let q1 = (q0 + QUERY_CHUNK).min(nq);
            let rows = q1 - q0;
            self.scores.resize(rows * docs, 0.0);
            b.sgemm(
                NO_TRANS,
                TRANS,
                rows,
                docs,
                dim,
                &self.queries.data[q0 * dim..q1 * dim],
                dim,
                block,
                dim,
                &mut self.scores,
            )
            .map_err(|e| Error::msg(format!("search: {e}")))?;
            let (k, qn) = (self.k, &self.query_norms);
            let scores = &self.scores;
            self.lists[q0..q1]
                .par_iter_mut()
                .zip(&mut self.floor[q0..q1])
                .enumerate()
                .for_each(|(r, (list, floor))| {
                    let qi = q0 + r;
                    let row = &scores[r * docs..(r + 1) * docs];
                    for (j, &dot) in row.iter().enumerate() {
                        let s = dot / (qn[qi] * doc_norms[j]);
                        // equal to the floor may still win on its id
                        if s < *floor || skip(qi, first + j) {
                            continue;
                        }
                        list.push((first + j, s));
                        if list.len() >= 2 * k {
                            prune(list, k, floor, tie);
                        }
                    }
                });
        }
        Ok(())
    }

    /// Each query's top k, best first.
    pub fn finish(mut self, tie: &impl Fn(usize, usize) -> Ordering) -> Vec<Vec<(usize, f32)>> {
        let k = self.k;
        for (list, floor) in self.lists.iter_mut().zip(&mut self.floor) {
            prune(list, k, floor, tie);
            list.sort_by(order(tie));
        }
        self.lists
    }
}

/// Keep the best `k` of `list` and raise the floor to the k-th score.
fn prune(
    list: &mut Vec<(usize, f32)>,
    k: usize,
    floor: &mut f32,
    tie: &impl Fn(usize, usize) -> Ordering,
) {
    if list.len() > k {
        list.select_nth_unstable_by(k - 1, order(tie));
        list.truncate(k);
    }
    if list.len() == k {
        *floor = list.iter().map(|h| h.1).fold(f32::INFINITY, f32::min);
    }
}
