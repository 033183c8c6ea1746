//! Approximate nearest-neighbour search for corpora where exact search is too slow: an IVF index
//! (k-means lists scanned by GEMM, the default) or usearch's HNSW graph. The
//! index only proposes candidates, by cosine: each query's candidates (twice the k asked, as
//! sentence-transformers' rescore_multiplier) are then scored exactly from the f32 vectors and
//! ranked as exact search ranks them, (-score, document), so the index's quantization never
//! reaches a score, and a set no larger than the candidate count gives exact search's result.
use super::hnsw::Hnsw;
use super::ivf::Ivf;
use super::kmeans::{self, unit_in_place};
use super::settings::{Breadth, IndexSettings, DEFAULT_EF_SEARCH, DEFAULT_PROBES};
use crate::error::{Error, Result};
use crate::model::Embeddings;
use std::path::Path;

pub struct AnnIndex {
    inner: Inner,
    /// The breadth found at build time to reach the target recall (`condenser index`'s
    /// calibration), the default of a search that asks none.
    pub calibrated: Option<usize>,
}

enum Inner {
    Hnsw(Hnsw),
    Ivf(Ivf),
}

impl AnnIndex {
    fn of(inner: Inner) -> AnnIndex {
        AnnIndex {
            inner,
            calibrated: None,
        }
    }

    /// An empty index for `capacity` vectors of width `dim`; an IVF's lists are trained on the
    /// vectors `sample(n)` returns (n of the store's rows, seeded).
    pub fn create(
        dim: usize,
        capacity: usize,
        s: &IndexSettings,
        sample: impl FnOnce(usize) -> Result<Vec<f32>>,
    ) -> Result<AnnIndex> {
        Ok(AnnIndex::of(match s {
            IndexSettings::Hnsw(h) => Inner::Hnsw(Hnsw::create(dim, capacity, h)?),
            IndexSettings::Ivf { lists, sample: n } => {
                let mut vectors = sample(*n as usize)?;
                unit_in_place(&mut vectors, dim);
                Inner::Ivf(Ivf::new(
                    dim,
                    kmeans::train(&vectors, dim, *lists as usize, 0)?,
                ))
            }
        }))
    }

    /// Load a saved index whole (it can grow: a resumed build).
    pub fn load(path: &Path, dim: usize, capacity: usize, s: &IndexSettings) -> Result<AnnIndex> {
        Ok(AnnIndex::of(match s {
            IndexSettings::Hnsw(h) => Inner::Hnsw(Hnsw::load(path, dim, capacity, h)?),
            IndexSettings::Ivf { .. } => Inner::Ivf(Ivf::load(path, dim)?),
        }))
    }

    pub fn len(&self) -> usize {
        match &self.inner {
            Inner::Hnsw(h) => h.len(),
            Inner::Ivf(i) => i.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn dim(&self) -> usize {
        match &self.inner {
            Inner::Hnsw(h) => h.dim(),
            Inner::Ivf(i) => i.dim(),
        }
    }

    /// Add rows `first ..` (`block`: their vectors, row after row).
    pub fn add(&mut self, first: usize, block: &[f32]) -> Result<()> {
        match &mut self.inner {
            Inner::Hnsw(h) => h.add(first, block),
            Inner::Ivf(i) => i.add(first, block),
        }
    }

    /// Write the index to `dest` through a temporary file and a rename.
    pub fn save(&self, dest: &Path) -> Result<()> {
        match &self.inner {
            Inner::Hnsw(h) => h.save(dest),
            Inner::Ivf(i) => i.save(dest),
        }
    }

    /// An IVF without its second lists (`Ivf::drop_second_lists`); whether it had any.
    pub fn drop_second_lists(&mut self) -> bool {
        match &mut self.inner {
            Inner::Ivf(i) => i.drop_second_lists(),
            Inner::Hnsw(_) => false,
        }
    }

    /// An IVF's entries scanned a query of `q` at `breadth` (`Ivf::scanned`); none for a graph.
    pub fn scanned(&self, q: &Embeddings, breadth: usize) -> Result<Option<f64>> {
        match &self.inner {
            Inner::Ivf(i) => i.scanned(q, breadth).map(Some),
            Inner::Hnsw(_) => Ok(None),
        }
    }

    /// The flag that sets this index's breadth.
    pub fn breadth_flag(&self) -> &'static str {
        match &self.inner {
            Inner::Hnsw(_) => "--ef-search",
            Inner::Ivf(_) => "--probes",
        }
    }

    /// The breadths a calibration tries, narrowest first, the last every list; none for a
    /// graph, whose walk from a vector it holds is biased (it lands on the vector and its linked
    /// neighbours: 100k real sentences, ef 16, gave recall@10 0.989 on its own vectors, 0.935 on
    /// other sentences), while an IVF probes the same lists for a vector whether it holds it or
    /// not.
    pub fn calibration_ladder(&self) -> Option<Vec<usize>> {
        let Inner::Ivf(i) = &self.inner else {
            return None;
        };
        let steps = [
            8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024,
        ];
        let mut l: Vec<usize> = steps.into_iter().filter(|&p| p < i.lists()).collect();
        let mut wider = l.last().map_or(1, |&p| p * 2);
        while wider < i.lists() {
            l.push(wider);
            wider *= 2;
        }
        l.push(i.lists());
        Some(l)
    }

    /// The breadth `b` asks of this kind of index (the calibrated one when it asks none),
    /// refusing the other kind's flag.
    pub fn breadth(&self, b: Breadth) -> Result<usize> {
        let (mine, other, fallback, kind, other_flag) = match &self.inner {
            Inner::Hnsw(_) => (
                b.ef_search,
                b.probes,
                DEFAULT_EF_SEARCH,
                "an HNSW graph",
                "--probes",
            ),
            Inner::Ivf(_) => (
                b.probes,
                b.ef_search,
                DEFAULT_PROBES,
                "an IVF index",
                "--ef-search",
            ),
        };
        if other.is_some() {
            return Err(Error::msg(format!(
                "{other_flag} is for the other kind of index; this one is {kind}: use {}",
                self.breadth_flag()
            )));
        }
        Ok(mine.or(self.calibrated).unwrap_or(fallback))
    }

    /// Per query, the `count` rows nearest by cosine (all rows when `count` covers the index);
    /// `breadth` is the graph walk's ef or the IVF's probes.
    pub fn nearest(&self, q: &Embeddings, count: usize, breadth: usize) -> Result<Vec<Vec<usize>>> {
        if q.dim != self.dim() {
            return Err(Error::msg(format!(
                "the queries are {} wide, the index's vectors {}",
                q.dim,
                self.dim()
            )));
        }
        if count >= self.len() {
            // every row is a candidate: exact by construction (a graph walk can miss a node,
            // e.g. one of several equal vectors)
            return Ok(vec![(0..self.len()).collect(); q.len()]);
        }
        match &self.inner {
            Inner::Hnsw(h) => h.nearest(q, count, breadth),
            Inner::Ivf(i) => i.nearest(q, count, breadth),
        }
    }
}
