//! The IVF's file: a safetensors layout (the module's doc lists the tensors), written in one
//! pass through a temporary file and a rename, and read back checking every tensor's type, shape
//! and place and that the list offsets cover the entries, so a truncated or foreign file is one
//! clear error.
use super::Ivf;
use crate::error::{Error, Result};
use safetensors::tensor::{Dtype, Metadata, TensorInfo};
use std::io::{BufWriter, Read, Write};
use std::path::Path;

fn bad(path: &Path, what: impl std::fmt::Display) -> Error {
    Error::file(path, format!("not a readable IVF index: {what}"))
}

impl Ivf {
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
}

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
