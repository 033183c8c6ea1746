//! The IVF index (inverted file): the unit vectors split into lists by spherical k-means, each
//! query scanning only the lists of its `probes` nearest centroids. Chosen over the HNSW graph
//! for batch search by measurement (benches/README.md): a graph walk is one query's chain of
//! memory lookups, while a list is scanned for all the queries that probe it by one GEMM, so the
//! scan runs at BLAS speed, and k-means builds in a minute what the graph builds in ten.
//! Each vector is also filed under a second list, by reference (SOAR, `kmeans::assign_spilled`):
//! 4 bytes a vector buy ~1.7x fewer entries scanned for the same recall on real embeddings.
//! Vectors are kept as f16 (half the memory; candidates are rescored from the f32 store), in a
//! safetensors file: `centroids` F32 [lists, dim], `offsets` U64 [lists + 1] (list l holds
//! entries offsets[l] .. offsets[l + 1]), `rows` U32 [entries] (the store row of each entry),
//! `vectors` F16 [entries, dim], entries in list order; `spill_offsets` U64 [lists + 1] and
//! `spilled` U32 [..] (list l's second-list entries, as entry numbers, at spill_offsets[l] ..
//! spill_offsets[l + 1]).
mod file;

use super::kmeans::{assign_spilled, keep_best, nearest_centroids, unit_rows};
use crate::error::{Error, Result};
use crate::model::kernels::blas::{blas, serial, NO_TRANS, TRANS};
use crate::model::Embeddings;
use half::f16;
use half::slice::{HalfBitsSliceExt, HalfFloatSliceExt};
use rayon::prelude::*;

/// Queries whose lists are scanned together: each list is read once per chunk, by one GEMM
/// against all the chunk's queries that probe it.
const QUERY_CHUNK: usize = 16384;
/// Candidates (query, entry, score) held at once, 48 MB: the lists are scanned in as many groups
/// as it takes.
const CANDIDATE_BUDGET: usize = 1 << 22;
/// Groups of lists at least: after the first, each query's floor keeps out most scores.
const MIN_GROUPS: usize = 8;

pub struct Ivf {
    dim: usize,
    centroids: Vec<f32>,
    /// f16 bits of each entry's unit vector; in list order after `load`, in order added after.
    vectors: Vec<u16>,
    rows: Vec<u32>,
    lists: Vec<u32>,
    /// Each entry's second list (u32::MAX: none).
    second: Vec<u32>,
    /// Where each list starts, while the entries are in list order (a loaded index).
    offsets: Option<Vec<usize>>,
    /// Each list's second-list entries (a loaded index): list l's at `spilled[spill[l]..spill[l + 1]]`.
    spill: Vec<usize>,
    spilled: Vec<u32>,
}

impl Ivf {
    /// An empty index over the lists of `centroids` (unit, `dim` wide).
    pub fn new(dim: usize, centroids: Vec<f32>) -> Ivf {
        Ivf {
            dim,
            centroids,
            vectors: Vec::new(),
            rows: Vec::new(),
            lists: Vec::new(),
            second: Vec::new(),
            offsets: None,
            spill: Vec::new(),
            spilled: Vec::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    pub fn lists(&self) -> usize {
        self.centroids.len() / self.dim
    }

    /// Add store rows `first ..` (`block`: their vectors, row after row) to their lists.
    pub fn add(&mut self, first: usize, block: &[f32]) -> Result<()> {
        if first + block.len() / self.dim > u32::MAX as usize {
            return Err(Error::msg(
                "the IVF index holds at most 4,294,967,295 vectors: shard the corpus",
            ));
        }
        let unit = unit_rows(block, self.dim);
        let best = assign_spilled(&unit, &self.centroids, self.dim)?;
        let start = self.vectors.len();
        self.vectors.resize(start + unit.len(), 0);
        self.vectors[start..]
            .reinterpret_cast_mut::<f16>()
            .convert_from_f32_slice(&unit);
        self.lists.extend(best.iter().map(|b| b.0));
        self.second.extend(best.iter().map(|b| b.1));
        self.rows
            .extend((first..first + best.len()).map(|r| r as u32));
        (self.offsets, self.spill, self.spilled) = (None, Vec::new(), Vec::new());
        Ok(())
    }

    /// Forget the second lists (each vector then in its first list alone); whether there were any.
    pub fn drop_second_lists(&mut self) -> bool {
        let had = !self.spilled.is_empty();
        self.second.iter_mut().for_each(|s| *s = u32::MAX);
        self.spilled.clear();
        if let Some(o) = &self.offsets {
            self.spill = vec![0; o.len()];
        }
        had
    }

    /// The entries a query of `q` scans at `probes`, on average (second-list entries included:
    /// the GEMM scores them all): the cost of a search at that breadth.
    pub fn scanned(&self, q: &Embeddings, probes: usize) -> Result<f64> {
        let Some(offsets) = &self.offsets else {
            return Err(Error::msg("the IVF index is still being built"));
        };
        let probes = probes.clamp(1, self.lists().max(1));
        let probed = nearest_centroids(
            &unit_rows(&q.data, self.dim),
            &self.centroids,
            self.dim,
            probes,
        )?;
        let size = |l: usize| offsets[l + 1] - offsets[l] + self.spill[l + 1] - self.spill[l];
        let total: usize = probed.iter().map(|p| size(p.0 as usize)).sum();
        Ok(total as f64 / q.len().max(1) as f64)
    }

    /// Per query, the store rows of the `count` entries of largest cosine among the lists of its
    /// `probes` nearest centroids, best first.
    pub fn nearest(&self, q: &Embeddings, count: usize, probes: usize) -> Result<Vec<Vec<usize>>> {
        let Some(offsets) = &self.offsets else {
            return Err(Error::msg("the IVF index is still being built"));
        };
        let (dim, lists) = (self.dim, self.lists());
        if count == 0 {
            return Ok(vec![Vec::new(); q.len()]);
        }
        let probes = probes.clamp(1, lists.max(1));
        let qs = unit_rows(&q.data, dim);
        let mut out = Vec::with_capacity(q.len());
        for q0 in (0..q.len()).step_by(QUERY_CHUNK) {
            let part = &qs[q0 * dim..(q0 + QUERY_CHUNK).min(q.len()) * dim];
            let n = part.len() / dim;
            let probed = nearest_centroids(part, &self.centroids, dim, probes)?;
            let mut askers: Vec<Vec<u32>> = vec![Vec::new(); lists];
            let words = lists.div_ceil(64);
            let mut probes_of = vec![0u64; n * words];
            for (i, ps) in probed.chunks(probes).enumerate() {
                for &(l, _) in ps {
                    askers[l as usize].push(i as u32);
                    probes_of[i * words + l as usize / 64] |= 1 << (l % 64);
                }
            }
            // lists in groups, each query's candidates so far setting a floor for the next
            // group's (most scores then fall below it and are never kept)
            let groups = (n * probes * count)
                .div_ceil(CANDIDATE_BUDGET)
                .max(MIN_GROUPS);
            let mut best: Vec<Vec<(u32, f32)>> = vec![Vec::new(); n];
            let mut floors = vec![f32::NEG_INFINITY; n];
            for g in 0..groups {
                let ls = g * lists / groups..(g + 1) * lists / groups;
                // one GEMM a list, lists in parallel (each on one BLAS thread)
                let asks = Asks {
                    qs: part,
                    probes_of: &probes_of,
                    words,
                    floors: &floors,
                    count,
                };
                let found: Vec<Vec<(u32, u32, f32)>> = serial(|| {
                    ls.into_par_iter()
                        .map_init(Scratch::default, |scratch, l| {
                            self.scan(offsets, l, &askers[l], &asks, scratch)
                        })
                        .collect::<Result<_>>()
                })?;
                for (qi, e, s) in found.into_iter().flatten() {
                    let c = &mut best[qi as usize];
                    c.push((e, s));
                    if c.len() >= 2 * count {
                        keep_best(c, count);
                        floors[qi as usize] = c[count - 1].1;
                    }
                }
            }
            out.par_extend(best.into_par_iter().map(|mut c| {
                keep_best(&mut c, count);
                c.iter()
                    .map(|&(e, _)| self.rows[e as usize] as usize)
                    .collect::<Vec<_>>()
            }));
        }
        Ok(out)
    }

    /// The best `asks.count` (query, entry, score) of list `l` (its own entries and those filed
    /// under it second) for each query of `who` (indices into `asks.qs`) among those scoring at
    /// least the query's floor. A second-list entry is left to its own list where the query
    /// probes that too, so no entry is found twice.
    fn scan(
        &self,
        offsets: &[usize],
        l: usize,
        who: &[u32],
        asks: &Asks,
        scratch: &mut Scratch,
    ) -> Result<Vec<(u32, u32, f32)>> {
        let range = offsets[l]..offsets[l + 1];
        let spilled = &self.spilled[self.spill[l]..self.spill[l + 1]];
        let (dim, own, count) = (self.dim, range.len(), asks.count);
        let n = own + spilled.len();
        if who.is_empty() || n == 0 {
            return Ok(Vec::new());
        }
        let Scratch { v, m, scores } = scratch;
        v.resize(n * dim, 0.0);
        let entries = std::iter::once(range.clone())
            .chain(spilled.iter().map(|&e| e as usize..e as usize + 1));
        let mut at = 0;
        for r in entries {
            let (from, to) = (r.start * dim, r.end * dim);
            self.vectors[from..to]
                .reinterpret_cast::<f16>()
                .convert_to_f32_slice(&mut v[at..at + to - from]);
            at += to - from;
        }
        m.clear();
        for &i in who {
            m.extend_from_slice(&asks.qs[i as usize * dim..(i as usize + 1) * dim]);
        }
        scores.resize(who.len() * n, 0.0);
        let b = blas().ok_or_else(|| Error::msg("the IVF index needs a BLAS (none was loaded)"))?;
        b.sgemm(NO_TRANS, TRANS, who.len(), n, dim, m, dim, v, dim, scores)
            .map_err(|e| Error::msg(format!("IVF scan: {e}")))?;
        let mut out = Vec::new();
        let mut row = Vec::new();
        let entry = |j: usize| match j < own {
            true => (range.start + j) as u32,
            false => spilled[j - own],
        };
        for (&qi, s) in who.iter().zip(scores.chunks(n)) {
            let floor = asks.floors[qi as usize];
            // a second-list entry whose own list the query probes is found there
            let elsewhere = |j: usize| j >= own && asks.probes(qi, self.lists[entry(j) as usize]);
            row.clear();
            let above = s.iter().enumerate().filter(|x| *x.1 >= floor);
            row.extend(
                above
                    .filter(|x| !elsewhere(x.0))
                    .map(|(j, &x)| (entry(j), x)),
            );
            if row.len() > count {
                keep_best(&mut row, count);
            }
            out.extend(row.iter().map(|&(e, x)| (qi, e, x)));
        }
        Ok(out)
    }
}

/// A scanning thread's buffers, reused from list to list rather than allocated for each (a
/// profile of the scan showed the kernel zeroing fresh pages; the reuse changed the 100k
/// candidate search's time by less than its run-to-run spread).
#[derive(Default)]
struct Scratch {
    v: Vec<f32>,
    m: Vec<f32>,
    scores: Vec<f32>,
}

/// A chunk of queries (unit rows), the lists each probes (`words` bits a query), each one's
/// floor so far and how many candidates each wants.
struct Asks<'a> {
    qs: &'a [f32],
    probes_of: &'a [u64],
    words: usize,
    floors: &'a [f32],
    count: usize,
}

impl Asks<'_> {
    fn probes(&self, query: u32, list: u32) -> bool {
        let word = self.probes_of[query as usize * self.words + list as usize / 64];
        word >> (list % 64) & 1 == 1
    }
}

#[cfg(test)]
mod tests;
