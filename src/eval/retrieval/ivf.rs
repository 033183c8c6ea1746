//! The IVF index (inverted file): the unit vectors split into lists by spherical k-means, each
//! query scanning only the lists of its `probes` nearest centroids. Chosen over the HNSW graph
//! for batch search by measurement (benches/README.md): a graph walk is one query's chain of
//! memory lookups, while a list is scanned for all the queries that probe it by one GEMM, so the
//! scan runs at BLAS speed, and k-means builds in a minute what the graph builds in ten.
//! Vectors are kept as f16 (half the memory; candidates are rescored from the f32 store), in a
//! safetensors file: `centroids` F32 [lists, dim], `offsets` U64 [lists + 1] (list l holds
//! entries offsets[l] .. offsets[l + 1]), `rows` U32 [entries] (the store row of each entry),
//! `vectors` F16 [entries, dim], entries in list order.
use super::kmeans::{keep_best, nearest_centroids, unit_rows};
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
    /// Where each list starts, while the entries are in list order (a loaded index).
    offsets: Option<Vec<usize>>,
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
            offsets: None,
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
        let best = nearest_centroids(&unit, &self.centroids, self.dim, 1)?;
        let start = self.vectors.len();
        self.vectors.resize(start + unit.len(), 0);
        self.vectors[start..]
            .reinterpret_cast_mut::<f16>()
            .convert_from_f32_slice(&unit);
        self.lists.extend(best.iter().map(|b| b.0));
        self.rows
            .extend((first..first + best.len()).map(|r| r as u32));
        self.offsets = None;
        Ok(())
    }

    /// Write the index (entries in list order) to `dest`, through a temporary file and a rename.
    pub fn save(&self, dest: &Path) -> Result<()> {
        let lists = self.lists();
        let mut order: Vec<u32> = (0..self.len() as u32).collect();
        order.sort_by_key(|&e| (self.lists[e as usize], self.rows[e as usize]));
        let mut offsets = vec![0u64; lists + 1];
        for &l in &self.lists {
            offsets[l as usize + 1] += 1;
        }
        for l in 0..lists {
            offsets[l + 1] += offsets[l];
        }
        let meta = layout(lists, self.len(), self.dim);
        let dim = self.dim;
        let mut header = serde_json::to_vec(&meta).expect("serializes");
        header.resize(header.len().div_ceil(8) * 8, b' ');
        crate::data::write_with(dest, |f| {
            let mut w = BufWriter::with_capacity(1 << 20, f);
            w.write_all(&(header.len() as u64).to_le_bytes())?;
            w.write_all(&header)?;
            w.write_all(bytemuck::cast_slice(&offsets))?;
            w.write_all(bytemuck::cast_slice(&self.centroids))?;
            for &e in &order {
                w.write_all(&self.rows[e as usize].to_le_bytes())?;
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
        let (lists, n) = (shape("centroids"), shape("rows"));
        let (lists, n) = (lists.first().copied(), n.first().copied());
        let want = layout(lists.unwrap_or(0), n.unwrap_or(0), dim);
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
        let (lists, n) = (lists.unwrap_or(0), n.unwrap_or(0));
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
        let mut centroids = vec![0f32; lists * dim];
        read(bytemuck::cast_slice_mut(&mut centroids))?;
        let mut rows = vec![0u32; n];
        read(bytemuck::cast_slice_mut(&mut rows))?;
        let mut vectors = vec![0u16; n * dim];
        read(bytemuck::cast_slice_mut(&mut vectors))?;
        let offsets: Vec<usize> = offsets.iter().map(|&o| o as usize).collect();
        if offsets.windows(2).any(|w| w[0] > w[1]) || offsets.last() != Some(&n) {
            return Err(bad(path, "its list offsets do not cover its entries"));
        }
        let lists_of =
            (0..lists).flat_map(|l| std::iter::repeat_n(l as u32, offsets[l + 1] - offsets[l]));
        Ok(Ivf {
            dim,
            lists: lists_of.collect(),
            centroids,
            vectors,
            rows,
            offsets: Some(offsets),
        })
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
            for (i, ps) in probed.chunks(probes).enumerate() {
                ps.iter()
                    .for_each(|&(l, _)| askers[l as usize].push(i as u32));
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
                let found: Vec<Vec<(u32, u32, f32)>> = serial(|| {
                    ls.into_par_iter()
                        .map(|l| {
                            let entries = offsets[l]..offsets[l + 1];
                            self.scan(entries, &askers[l], part, &floors, count)
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

    /// The best `count` (query, entry, score) of the entries `range` (one list) for each query
    /// of `who` (indices into `qs`) among those scoring at least the query's floor.
    fn scan(
        &self,
        range: std::ops::Range<usize>,
        who: &[u32],
        qs: &[f32],
        floors: &[f32],
        count: usize,
    ) -> Result<Vec<(u32, u32, f32)>> {
        let (dim, n) = (self.dim, range.len());
        if who.is_empty() || n == 0 {
            return Ok(Vec::new());
        }
        let mut v = vec![0f32; n * dim];
        self.vectors[range.start * dim..range.end * dim]
            .reinterpret_cast::<f16>()
            .convert_to_f32_slice(&mut v);
        let mut m = Vec::with_capacity(who.len() * dim);
        for &i in who {
            m.extend_from_slice(&qs[i as usize * dim..(i as usize + 1) * dim]);
        }
        let mut scores = vec![0f32; who.len() * n];
        let b = blas().ok_or_else(|| Error::msg("the IVF index needs a BLAS (none was loaded)"))?;
        b.sgemm(
            NO_TRANS,
            TRANS,
            who.len(),
            n,
            dim,
            &m,
            dim,
            &v,
            dim,
            &mut scores,
        )
        .map_err(|e| Error::msg(format!("IVF scan: {e}")))?;
        let mut out = Vec::new();
        let mut row = Vec::new();
        for (&qi, s) in who.iter().zip(scores.chunks(n)) {
            let floor = floors[qi as usize];
            row.clear();
            let above = s.iter().enumerate().filter(|x| *x.1 >= floor);
            row.extend(above.map(|(j, &x)| ((range.start + j) as u32, x)));
            if row.len() > count {
                keep_best(&mut row, count);
            }
            out.extend(row.iter().map(|&(e, x)| (qi, e, x)));
        }
        Ok(out)
    }
}

/// The file's tensors, in the order written: widest element first, so each lies aligned.
fn layout(lists: usize, n: usize, dim: usize) -> Metadata {
    let parts = [
        ("offsets", Dtype::U64, vec![lists + 1]),
        ("centroids", Dtype::F32, vec![lists, dim]),
        ("rows", Dtype::U32, vec![n]),
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
