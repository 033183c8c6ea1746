//! A corpus held in memory searched through an index of its stored vectors (mining, evaluation),
//! and the stored corpus that evaluation reads instead of embedding the corpus again.
use super::ann::AnnIndex;
use super::description::open_index;
use super::score::{best, ranks_like, score_pair, ScoreFn};
use super::settings::Breadth;
use super::store::StoredEmbeddings;
use crate::error::Result;
use crate::model::Embeddings;
use rayon::prelude::*;
use std::cmp::Ordering;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// An index over a corpus held in memory: which documents each of the index's rows stands for
/// (equal texts share one stored row), and how wide to search.
#[derive(Clone)]
pub struct IndexedCorpus {
    pub index: Arc<AnnIndex>,
    pub docs_of_row: Arc<Vec<Vec<u32>>>,
    /// The walk's ef or the IVF's probes (`AnnIndex::breadth`).
    pub breadth: usize,
    /// The stored vectors were unit length (dot product then equals the index's cosine).
    pub normalized: bool,
}

impl IndexedCorpus {
    /// `search_skipping`'s result, from the index's candidates rescored exactly against `c`.
    pub fn search(
        &self,
        q: &Embeddings,
        c: &Embeddings,
        score: ScoreFn,
        k: usize,
        skip: impl Fn(usize, usize) -> bool + Sync,
        tie: impl Fn(usize, usize) -> Ordering + Sync,
    ) -> Result<Vec<Vec<(usize, f32)>>> {
        ranks_like(score, self.normalized)?;
        let rows = self.index.nearest(q, 2 * k, self.breadth)?;
        Ok(rows
            .into_par_iter()
            .enumerate()
            .map(|(qi, rows)| {
                let mut list: Vec<(usize, f32)> = Vec::with_capacity(rows.len());
                for r in rows {
                    for &d in self
                        .docs_of_row
                        .get(r)
                        .map(Vec::as_slice)
                        .unwrap_or_default()
                    {
                        let d = d as usize;
                        if !skip(qi, d) && !list.iter().any(|h| h.0 == d) {
                            list.push((d, score_pair(score, q.row(qi), c.row(d))));
                        }
                    }
                }
                best(list, k, &tie)
            })
            .collect())
    }
}

/// The index at `path` over `store`, for a corpus whose texts `lookup_rows` matched.
pub fn indexed_corpus(
    path: &Path,
    store: &StoredEmbeddings,
    docs_of_row: Vec<Vec<u32>>,
    breadth: Breadth,
) -> Result<IndexedCorpus> {
    let index = open_index(path, store)?;
    Ok(IndexedCorpus {
        breadth: index.breadth(breadth)?,
        index: Arc::new(index),
        docs_of_row: Arc::new(docs_of_row),
        normalized: store.meta.normalize,
    })
}

/// A corpus's stored vectors (`encode`'s output, checked against the model evaluated), searched
/// through the index at `index` when one is given.
#[derive(Clone, Debug)]
pub struct StoredCorpus {
    pub store: StoredEmbeddings,
    pub index: Option<PathBuf>,
    pub breadth: Breadth,
}

impl StoredCorpus {
    /// The vector of each of `texts`, in order, and the index over them when one is used.
    pub fn vectors(&self, texts: &[&str]) -> Result<(Embeddings, Option<IndexedCorpus>)> {
        match &self.index {
            None => Ok((self.store.lookup(texts)?, None)),
            Some(path) => {
                let (vectors, rows) = self.store.lookup_rows(texts)?;
                let indexed = indexed_corpus(path, &self.store, rows, self.breadth)?;
                Ok((vectors, Some(indexed)))
            }
        }
    }
}
