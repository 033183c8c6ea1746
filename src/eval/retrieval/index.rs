//! Approximate nearest-neighbour search for corpora where exact search is too slow: usearch's
//! HNSW graph (chosen over hnsw_rs and instant-distance by measurement: benches/README.md). The
//! index only proposes candidates, by cosine: each query's candidates (twice the k asked, as
//! sentence-transformers' rescore_multiplier) are then scored exactly from the f32 vectors and
//! ranked as exact search ranks them, (-score, document), so the index's quantization never
//! reaches a score, and a set no larger than the candidate count gives exact search's result.
use super::search::{order, score_pair};
use super::ScoreFn;
use crate::error::{Error, Result};
use crate::model::Embeddings;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::path::Path;
use std::sync::Arc;

/// How the index stores its copy of the vectors (scores always come from the f32 vectors).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Quantization {
    F32,
    F16,
    /// A byte a dimension: a quarter of f32's memory, the fastest graph walk.
    I8,
}

/// How the graph is built (HNSW's M and efConstruction; defaults measured at 1M vectors to
/// reach recall@10 0.98 at the default --ef-search).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, clap::Args)]
pub struct IndexSettings {
    /// Links per node (HNSW's M): more give better recall, a slower build and a bigger index
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u64).range(2..=1024))]
    pub connectivity: u64,
    /// Candidates weighed while linking each vector (efConstruction)
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..))]
    pub ef_construction: u64,
    #[arg(long, value_enum, default_value = "i8")]
    pub quantization: Quantization,
}

/// Breadth of each query's graph walk when none is given (recall@10 0.98 at 1M with the
/// default build: benches/README.md).
pub const DEFAULT_EF_SEARCH: usize = 128;

fn ann_err(what: &str, e: impl std::fmt::Display) -> Error {
    Error::msg(format!("index {what}: {e}"))
}

pub struct AnnIndex {
    inner: usearch::Index,
    dim: usize,
}

fn options(dim: usize, s: &IndexSettings) -> usearch::IndexOptions {
    usearch::IndexOptions {
        dimensions: dim,
        // inner product of unit vectors: the cosine (vectors are normalised on the way in)
        metric: usearch::MetricKind::IP,
        quantization: match s.quantization {
            Quantization::F32 => usearch::ScalarKind::F32,
            Quantization::F16 => usearch::ScalarKind::F16,
            Quantization::I8 => usearch::ScalarKind::I8,
        },
        connectivity: s.connectivity as usize,
        expansion_add: s.ef_construction as usize,
        expansion_search: DEFAULT_EF_SEARCH,
        multi: false,
    }
}

fn unit(v: &[f32]) -> Vec<f32> {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
    v.iter().map(|x| x / n).collect()
}

impl AnnIndex {
    /// An empty index for `capacity` vectors of width `dim`.
    pub fn create(dim: usize, capacity: usize, s: &IndexSettings) -> Result<AnnIndex> {
        let inner = usearch::Index::new(&options(dim, s)).map_err(|e| ann_err("create", e))?;
        let index = AnnIndex { inner, dim };
        index.reserve(capacity)?;
        Ok(index)
    }

    fn reserve(&self, capacity: usize) -> Result<()> {
        self.inner
            .reserve_capacity_and_threads(capacity, rayon::current_num_threads().max(1))
            .map_err(|e| ann_err("reserve", e))
    }

    /// Load a saved index whole (it can grow: a resumed build).
    pub fn load(path: &Path, dim: usize, capacity: usize, s: &IndexSettings) -> Result<AnnIndex> {
        let inner = usearch::Index::new(&options(dim, s)).map_err(|e| ann_err("create", e))?;
        inner
            .load(&path.to_string_lossy())
            .map_err(|e| Error::file(path, format!("not a readable index: {e}")))?;
        let index = AnnIndex { inner, dim };
        index.reserve(capacity.max(index.len()))?;
        Ok(index)
    }

    pub fn len(&self) -> usize {
        self.inner.size()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Add rows `first ..` (`block`: their vectors, row after row), in parallel.
    pub fn add(&self, first: usize, block: &[f32]) -> Result<()> {
        block
            .par_chunks_exact(self.dim)
            .enumerate()
            .try_for_each(|(i, v)| {
                self.inner
                    .add((first + i) as u64, &unit(v))
                    .map_err(|e| ann_err("add", e))
            })
    }

    /// Write the index to `dest` through a temporary file and a rename.
    pub fn save(&self, dest: &Path) -> Result<()> {
        let name = dest.file_name().map(|n| n.to_string_lossy().to_string());
        let tmp = dest.with_file_name(format!(".{}.tmp", name.unwrap_or_default()));
        self.inner
            .save(&tmp.to_string_lossy())
            .map_err(|e| Error::file(&tmp, format!("saving the index: {e}")))?;
        std::fs::rename(&tmp, dest).map_err(|e| Error::file(dest, e))
    }

    /// Per query, the `count` rows nearest by cosine, walking the graph `ef` wide (all rows when
    /// `count` covers the index).
    pub fn nearest(&self, q: &Embeddings, count: usize, ef: usize) -> Result<Vec<Vec<usize>>> {
        if q.dim != self.dim {
            return Err(Error::msg(format!(
                "the queries are {} wide, the index's vectors {}",
                q.dim, self.dim
            )));
        }
        if count >= self.len() {
            // every row is a candidate: exact by construction (a graph walk can miss a node,
            // e.g. one of several equal vectors)
            return Ok(vec![(0..self.len()).collect(); q.len()]);
        }
        self.inner.change_expansion_search(ef.max(count));
        (0..q.len())
            .into_par_iter()
            .map(|i| {
                let m = self
                    .inner
                    .search(&unit(q.row(i)), count)
                    .map_err(|e| ann_err("search", e))?;
                Ok(m.keys.into_iter().map(|k| k as usize).collect())
            })
            .collect()
    }
}

/// An index over a corpus held in memory: which documents each of the index's rows stands for
/// (equal texts share one stored row), and how wide to search.
#[derive(Clone)]
pub struct IndexedCorpus {
    pub index: Arc<AnnIndex>,
    pub docs_of_row: Arc<Vec<Vec<u32>>>,
    pub ef: usize,
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
        let rows = self.index.nearest(q, 2 * k, self.ef)?;
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

/// Err unless the index's cosine ranking is `score`'s: a dot product over vectors that are not
/// unit length would rank otherwise, and the graph would propose the wrong candidates.
pub fn ranks_like(score: ScoreFn, normalized: bool) -> Result<()> {
    match score == ScoreFn::Dot && !normalized {
        true => Err(Error::msg(
            "the index finds candidates by cosine, and these vectors are not unit length: \
             search by dot product without --index",
        )),
        false => Ok(()),
    }
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
