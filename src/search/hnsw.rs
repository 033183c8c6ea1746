//! The HNSW graph index through usearch (chosen over hnsw_rs and instant-distance by
//! measurement: benches/README.md): one query at a time walks the graph, so it suits a few
//! queries at a time better than the IVF index, which scans its lists for batches of queries.
use super::kmeans::unit_rows;
use super::settings::{HnswSettings, Quantization, DEFAULT_EF_SEARCH};
use crate::error::{Error, Result};
use crate::model::Embeddings;
use rayon::prelude::*;
use std::path::Path;

fn ann_err(what: &str, e: impl std::fmt::Display) -> Error {
    Error::msg(format!("index {what}: {e}"))
}

pub struct Hnsw {
    inner: usearch::Index,
    dim: usize,
}

fn options(dim: usize, s: &HnswSettings) -> usearch::IndexOptions {
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

impl Hnsw {
    /// An empty index for `capacity` vectors of width `dim`.
    pub fn create(dim: usize, capacity: usize, s: &HnswSettings) -> Result<Hnsw> {
        let inner = usearch::Index::new(&options(dim, s)).map_err(|e| ann_err("create", e))?;
        let index = Hnsw { inner, dim };
        index.reserve(capacity)?;
        Ok(index)
    }

    fn reserve(&self, capacity: usize) -> Result<()> {
        self.inner
            .reserve_capacity_and_threads(capacity, rayon::current_num_threads().max(1))
            .map_err(|e| ann_err("reserve", e))
    }

    /// Load a saved index whole (it can grow: a resumed build).
    pub fn load(path: &Path, dim: usize, capacity: usize, s: &HnswSettings) -> Result<Hnsw> {
        let inner = usearch::Index::new(&options(dim, s)).map_err(|e| ann_err("create", e))?;
        inner
            .load(&path.to_string_lossy())
            .map_err(|e| Error::file(path, format!("not a readable index: {e}")))?;
        let index = Hnsw { inner, dim };
        index.reserve(capacity.max(index.len()))?;
        Ok(index)
    }

    pub fn len(&self) -> usize {
        self.inner.size()
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Add rows `first ..` (`block`: their vectors, row after row), in parallel.
    pub fn add(&self, first: usize, block: &[f32]) -> Result<()> {
        let unit = unit_rows(block, self.dim);
        unit.par_chunks_exact(self.dim)
            .enumerate()
            .try_for_each(|(i, v)| {
                self.inner
                    .add((first + i) as u64, v)
                    .map_err(|e| ann_err("add", e))
            })
    }

    /// Write the index to `dest` through a temporary file and a rename.
    pub fn save(&self, dest: &Path) -> Result<()> {
        let name = dest.file_name().map(|n| n.to_string_lossy().to_string());
        let tmp = dest.with_file_name(format!(".{}.tmp", name.unwrap_or_default()));
        let saved = self
            .inner
            .save(&tmp.to_string_lossy())
            .map_err(|e| Error::file(dest, format!("saving the index: {e}")))
            .and_then(|_| std::fs::rename(&tmp, dest).map_err(|e| Error::file(dest, e)));
        if saved.is_err() {
            // a failed save leaves the earlier index as it was, and no half-written copy
            let _ = std::fs::remove_file(&tmp);
        }
        saved
    }

    /// Per query, the `count` rows nearest by cosine, walking the graph `ef` wide.
    pub fn nearest(&self, q: &Embeddings, count: usize, ef: usize) -> Result<Vec<Vec<usize>>> {
        self.inner.change_expansion_search(ef.max(count));
        let unit = unit_rows(&q.data, self.dim);
        unit.par_chunks(self.dim)
            .map(|v| {
                let m = self
                    .inner
                    .search(v, count)
                    .map_err(|e| ann_err("search", e))?;
                Ok(m.keys.into_iter().map(|k| k as usize).collect())
            })
            .collect()
    }
}
