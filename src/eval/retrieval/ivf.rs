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
use super::kmeans::{assign_spilled, keep_best, nearest_centroids, unit_rows};
use crate::error::{Error, Result};
use crate::model::kernels::blas::{blas, serial, NO_TRANS, TRANS};
use crate::model::Embeddings;
use half::f16;
use half::slice::{HalfBitsSliceExt, HalfFloatSliceExt};
use rayon::prelude::*;
use safetensors::tensor::{Dtype, Metadata, TensorInfo};
use std::io::{BufWriter, Read, Write};
use std::path::Path;

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

fn bad(path: &Path, what: impl std::fmt::Display) -> Error {
    Error::file(path, format!("not a readable IVF index: {what}"))
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

    /// Write the index (entries in list order) to `dest`, through a temporary file and a rename.
    pub fn save(&self, dest: &Path) -> Result<()> {
        let lists = self.lists();
        let mut order: Vec<u32> = (0..self.len() as u32).collect();
        order.sort_by_key(|&e| (self.lists[e as usize], self.rows[e as usize]));
        let offsets = offsets_of(self.lists.iter().copied(), lists);
        // second lists, by the entries' numbers in list order
        let mut at = vec![0u32; self.len()];
        order
            .iter()
            .enumerate()
            .for_each(|(i, &e)| at[e as usize] = i as u32);
        let mut spilled: Vec<(u32, u32)> = (self.second.iter().zip(&at))
            .filter(|s| *s.0 != u32::MAX)
            .map(|(&l, &e)| (l, e))
            .collect();
        spilled.sort_unstable();
        let spill = offsets_of(spilled.iter().map(|s| s.0), lists);
        let meta = layout(lists, self.len(), spilled.len(), self.dim);
        let dim = self.dim;
        let mut header = serde_json::to_vec(&meta).expect("serializes");
        header.resize(header.len().div_ceil(8) * 8, b' ');
        crate::data::write_with(dest, |f| {
            let mut w = BufWriter::with_capacity(1 << 20, f);
            w.write_all(&(header.len() as u64).to_le_bytes())?;
            w.write_all(&header)?;
            w.write_all(bytemuck::cast_slice(&offsets))?;
            w.write_all(bytemuck::cast_slice(&spill))?;
            w.write_all(bytemuck::cast_slice(&self.centroids))?;
            for &e in &order {
                w.write_all(&self.rows[e as usize].to_le_bytes())?;
            }
            for &(_, e) in &spilled {
                w.write_all(&e.to_le_bytes())?;
            }
            for &e in &order {
                let e = e as usize;
                w.write_all(bytemuck::cast_slice(&self.vectors[e * dim..(e + 1) * dim]))?;
            }
            w.flush()
        })
    }

    /// Read an index `save` wrote.
    pub fn load(path: &Path, dim: usize) -> Result<Ivf> {
        let mut f = std::fs::File::open(path).map_err(|e| Error::file(path, e))?;
        let total = f.metadata().map_err(|e| Error::file(path, e))?.len() as usize;
        let mut len = [0u8; 8];
        f.read_exact(&mut len).map_err(|e| bad(path, e))?;
        let hlen = u64::from_le_bytes(len) as usize;
        if hlen > total.saturating_sub(8) || hlen > 1 << 20 {
            return Err(bad(path, "its header is longer than the file"));
        }
        let mut header = vec![0u8; hlen];
        f.read_exact(&mut header).map_err(|e| bad(path, e))?;
        let meta: Metadata = serde_json::from_slice(&header).map_err(|e| bad(path, e))?;
        let shape = |name: &str| meta.info(name).map(|i| i.shape.clone()).unwrap_or_default();
        let first = |name: &str| shape(name).first().copied().unwrap_or(0);
        let (lists, n, spills) = (first("centroids"), first("rows"), first("spilled"));
        let want = layout(lists, n, spills, dim);
        for (name, info) in want.tensors() {
            match meta.info(&name) {
                Some(i)
                    if (i.dtype, &i.shape, i.data_offsets)
                        == (info.dtype, &info.shape, info.data_offsets) => {}
                _ => {
                    return Err(bad(
                        path,
                        format!("its {name} tensor is not as written for {dim}-wide vectors"),
                    ))
                }
            }
        }
        let end = want
            .tensors()
            .values()
            .map(|i| i.data_offsets.1)
            .max()
            .unwrap_or(0);
        if 8 + hlen + end != total {
            return Err(bad(path, "truncated (its tensors do not fill the file)"));
        }
        // tensors in the order `save` writes them, read straight into their vectors
        let mut read = |buf: &mut [u8]| f.read_exact(buf).map_err(|e| bad(path, e));
        let mut offsets = vec![0u64; lists + 1];
        read(bytemuck::cast_slice_mut(&mut offsets))?;
        let mut spill = vec![0u64; lists + 1];
        read(bytemuck::cast_slice_mut(&mut spill))?;
        let mut centroids = vec![0f32; lists * dim];
        read(bytemuck::cast_slice_mut(&mut centroids))?;
        let mut rows = vec![0u32; n];
        read(bytemuck::cast_slice_mut(&mut rows))?;
        let mut spilled = vec![0u32; spills];
        read(bytemuck::cast_slice_mut(&mut spilled))?;
        let mut vectors = vec![0u16; n * dim];
        read(bytemuck::cast_slice_mut(&mut vectors))?;
        let covers = |o: &[u64], total: usize| {
            let o: Vec<usize> = o.iter().map(|&o| o as usize).collect();
            match o.windows(2).all(|w| w[0] <= w[1]) && o.last() == Some(&total) {
                true => Ok(o),
                false => Err(bad(path, "its list offsets do not cover its entries")),
            }
        };
        let (offsets, spill) = (covers(&offsets, n)?, covers(&spill, spills)?);
        if spilled.iter().any(|&e| e as usize >= n) {
            return Err(bad(path, "a second-list entry is past its entries"));
        }
        let list_of = |o: &[usize]| -> Vec<u32> {
            let each = (0..lists).map(|l| std::iter::repeat_n(l as u32, o[l + 1] - o[l]));
            each.flatten().collect()
        };
        let mut second = vec![u32::MAX; n];
        for (&e, l) in spilled.iter().zip(list_of(&spill)) {
            second[e as usize] = l;
        }
        Ok(Ivf {
            dim,
            lists: list_of(&offsets),
            second,
            centroids,
            vectors,
            rows,
            offsets: Some(offsets),
            spill,
            spilled,
        })
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

/// Where each list starts, given each entry's list.
fn offsets_of(lists_of: impl Iterator<Item = u32>, lists: usize) -> Vec<u64> {
    let mut offsets = vec![0u64; lists + 1];
    lists_of.for_each(|l| offsets[l as usize + 1] += 1);
    for l in 0..lists {
        offsets[l + 1] += offsets[l];
    }
    offsets
}

/// The file's tensors, in the order written: widest element first, so each lies aligned.
fn layout(lists: usize, n: usize, spills: usize, dim: usize) -> Metadata {
    let parts = [
        ("offsets", Dtype::U64, vec![lists + 1]),
        ("spill_offsets", Dtype::U64, vec![lists + 1]),
        ("centroids", Dtype::F32, vec![lists, dim]),
        ("rows", Dtype::U32, vec![n]),
        ("spilled", Dtype::U32, vec![spills]),
        ("vectors", Dtype::F16, vec![n, dim]),
    ];
    let mut at = 0;
    let infos = parts.into_iter().map(|(name, dtype, shape)| {
        let bytes = shape.iter().product::<usize>() * dtype.bitsize() / 8;
        at += bytes;
        let data_offsets = (at - bytes, at);
        (
            name.to_string(),
            TensorInfo {
                dtype,
                shape,
                data_offsets,
            },
        )
    });
    Metadata::new(None, infos.collect()).expect("distinct names, contiguous offsets")
}

#[cfg(test)]
mod tests {
    use super::super::kmeans::train;
    use super::*;
    use rand::{Rng, SeedableRng};
    use std::collections::HashSet;

    /// With a few lists probed, a query's candidates are the best of exactly the vectors filed
    /// (first or second) under a probed list, each found once, some through their second list.
    #[test]
    fn spilled_entries_are_found_once_and_only_where_probed() {
        let (dim, n, lists, probes, count) = (16, 3000, 40, 6, 30);
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut random = |rows: usize| -> Vec<f32> {
            (0..rows * dim).map(|_| rng.random::<f32>() - 0.5).collect()
        };
        let (data, queries) = (random(n), random(50));
        let unit = unit_rows(&data, dim);
        let centroids = train(&unit[..1000 * dim], dim, lists, 1).unwrap();
        let mut ivf = Ivf::new(dim, centroids.clone());
        ivf.add(0, &data[..1500 * dim]).unwrap();
        ivf.add(1500, &data[1500 * dim..]).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.ivf");
        ivf.save(&path).unwrap();
        let ivf = Ivf::load(&path, dim).unwrap();
        let q = Embeddings {
            dim,
            data: queries.clone(),
        };
        let got = ivf.nearest(&q, count, probes).unwrap();
        let filed = assign_spilled(&unit, &centroids, dim).unwrap();
        let uq = unit_rows(&queries, dim);
        let probed = nearest_centroids(&uq, &centroids, dim, probes).unwrap();
        let mut via_second = 0;
        for (i, found) in got.iter().enumerate() {
            let p: HashSet<u32> = probed[i * probes..(i + 1) * probes]
                .iter()
                .map(|x| x.0)
                .collect();
            let mut eligible: Vec<(u32, f32)> = (0..n)
                .filter(|&r| p.contains(&filed[r].0) || p.contains(&filed[r].1))
                .map(|r| {
                    let x = &unit[r * dim..(r + 1) * dim];
                    let s = x
                        .iter()
                        .zip(&uq[i * dim..(i + 1) * dim])
                        .map(|(a, b)| a * b);
                    (r as u32, s.sum())
                })
                .collect();
            keep_best(&mut eligible, count);
            let want: HashSet<usize> = eligible.iter().map(|e| e.0 as usize).collect();
            let have: HashSet<usize> = found.iter().copied().collect();
            assert_eq!(have.len(), found.len(), "query {i}: a row found twice");
            assert!(
                have.iter()
                    .all(|&r| p.contains(&filed[r].0) || p.contains(&filed[r].1)),
                "query {i}: a row from a list not probed"
            );
            // f16 copies may swap the last places
            assert!(have.intersection(&want).count() >= count - 2, "query {i}");
            via_second += have.iter().filter(|&&r| !p.contains(&filed[r].0)).count();
        }
        assert!(via_second > 0, "no candidate came through a second list");
        eprintln!(
            "{via_second} of {} candidates through their second list",
            50 * count
        );

        // without its second lists (dropped, saved, read back) each vector is in its first alone
        let mut ivf = ivf;
        let before = ivf.scanned(&q, probes).unwrap();
        assert!(ivf.drop_second_lists() && !ivf.drop_second_lists());
        let after = ivf.scanned(&q, probes).unwrap();
        assert!(after < 0.6 * before, "{after} entries a query vs {before}");
        ivf.save(&path).unwrap();
        let ivf = Ivf::load(&path, dim).unwrap();
        for (i, found) in ivf.nearest(&q, count, probes).unwrap().iter().enumerate() {
            let p: HashSet<u32> = probed[i * probes..(i + 1) * probes]
                .iter()
                .map(|x| x.0)
                .collect();
            assert_eq!(found.len(), count);
            assert!(found.iter().all(|&r| p.contains(&filed[r].0)), "query {i}");
        }
    }
}
