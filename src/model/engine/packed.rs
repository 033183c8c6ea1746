//! The engine's batch layout: sequences packed end to end, never padded, each with the identity
//! its dropout masks are drawn by (an example, or an example's column: never its place in the
//! batch, so a batch split across threads or mini-batches draws what it draws whole). Fields are
//! private and the one constructor checks them: the attention writes disjoint row blocks through
//! raw pointers, which overlapping offsets would turn into a race.
use crate::model::kernels::dropout_hash::row_id;
use candle_core::{bail, Result};

/// Sequences packed end to end: item i is rows `offsets[i] .. offsets[i] + lens[i]`.
#[derive(Clone, Debug)]
pub struct Packed {
    offsets: Vec<usize>,
    lens: Vec<usize>,
    rows: usize,
    /// Each row's dropout identity (`row_id` of its item's key and its position).
    row_ids: Vec<u64>,
}

impl Packed {
    /// Items of `lens` tokens, named by `keys` (one each).
    pub fn new(lens: Vec<usize>, keys: &[u64]) -> Result<Packed> {
        if keys.len() != lens.len() {
            bail!(
                "engine: {} dropout keys for {} sequences",
                keys.len(),
                lens.len()
            );
        }
        let rows = lens.iter().sum();
        let (mut offsets, mut row_ids) = (Vec::with_capacity(lens.len()), Vec::with_capacity(rows));
        for (&n, &k) in lens.iter().zip(keys) {
            offsets.push(row_ids.len());
            row_ids.extend((0..n).map(|pos| row_id(k, pos)));
        }
        Ok(Packed {
            offsets,
            lens,
            rows,
            row_ids,
        })
    }

    /// `seqs` packed, item i named by `keys[i]` (by its place in the batch where none are given:
    /// inference, which draws no dropout).
    pub fn of(seqs: &[&[u32]], keys: Option<&[u64]>) -> Result<Packed> {
        let lens = seqs.iter().map(|s| s.len()).collect();
        match keys {
            Some(k) => Packed::new(lens, k),
            None => Packed::new(lens, &(0..seqs.len() as u64).collect::<Vec<_>>()),
        }
    }

    /// Where each item's rows start.
    pub fn offsets(&self) -> &[usize] {
        &self.offsets
    }

    /// Each item's token count.
    pub fn lens(&self) -> &[usize] {
        &self.lens
    }

    /// Rows in all.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Each row's dropout identity.
    pub fn row_ids(&self) -> &[u64] {
        &self.row_ids
    }

    /// Each item's first row of `x` (rows x width), gathered: items x width.
    pub fn first_rows(&self, x: &[f32]) -> Vec<f32> {
        let w = x.len() / self.rows.max(1);
        let mut out = Vec::with_capacity(self.offsets.len() * w);
        for &o in &self.offsets {
            out.extend_from_slice(&x[o * w..(o + 1) * w]);
        }
        out
    }
}
