//! Multi-head self-attention over packed sequences (item i's tokens are rows off_i .. off_i + n_i,
//! no padding anywhere), memory-efficiently: forward keeps q, k, v, the context and one
//! log-sum-exp per (row, head); the probabilities (batch x heads x L x L) are never stored.
//! Backward recomputes each head's scores, rebuilds P from the log-sum-exp, regenerates the
//! dropout mask from its seed (rows.rs' `Mask`), and uses D_i = rowsum(dC_i * C_i) (with
//! dropout, C = (P * mask) V, so sum_j dPd_ij Pd_ij = dC_i . C_i), as FlashAttention does:
//!   dV = Pd^T dC,  dPd = dC V^T,  dS = P * (dPd * mask - D),  dQ = scale dS K,  dK = scale dS^T Q.
//! Each (item, head) is one task with a scratch of 2 n x n; tasks run in parallel unless the
//! caller is already one of several training threads.
use super::rows::Mask;
use super::{parallel, Packed};
use crate::model::kernels::blas::{Blas, NO_TRANS, TRANS};
use crate::model::kernels::fastmath::exp_f32;
use candle_core::Result;
use rayon::prelude::*;

/// Shapes of one attention: heads, head width, hidden = heads * head width.
#[derive(Clone, Copy, Debug)]
pub struct Heads {
    pub heads: usize,
    pub dim: usize,
    pub scale: f32,
}

impl Heads {
    fn hidden(&self) -> usize {
        self.heads * self.dim
    }
}

/// A raw pointer that tasks writing disjoint elements share.
#[derive(Clone, Copy)]
struct Shared(*mut f32);
// SAFETY: every task writes only its own (rows, head columns) block.
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

impl Shared {
    /// The element at offset `i`.
    ///
    /// # Safety
    /// `i` lies inside the buffer.
    unsafe fn at(self, i: usize) -> *mut f32 {
        self.0.add(i)
    }

    /// Copy `src` (n x w, packed) into rows r0.. at column c0 of the matrix (row width ld).
    ///
    /// # Safety
    /// The block lies inside the matrix and no other task writes it.
    unsafe fn put(self, src: &[f32], r0: usize, c0: usize, w: usize, ld: usize) {
        for (r, row) in src.chunks_exact(w).enumerate() {
            std::ptr::copy_nonoverlapping(row.as_ptr(), self.0.add((r0 + r) * ld + c0), w);
        }
    }
}

/// The dropout row of (packed row r, head h): unique per micro-batch.
fn mask_row(r: usize, h: usize, heads: usize) -> u64 {
    (r * heads + h) as u64
}

/// Row-wise softmax of `s` (n x n) times `scale`, in place; returns each row's log-sum-exp.
fn softmax_rows(s: &mut [f32], n: usize, scale: f32, lse: &mut [f32]) {
    for (row, l) in s.chunks_exact_mut(n).zip(lse.iter_mut()) {
        let mut max = f32::NEG_INFINITY;
        for v in row.iter_mut() {
            *v *= scale;
            max = max.max(*v);
        }
        let mut sum = 0f32;
        for v in row.iter_mut() {
            *v = exp_f32(*v - max);
            sum += *v;
        }
        let inv = 1.0 / sum;
        for v in row.iter_mut() {
            *v *= inv;
        }
        *l = max + sum.ln();
    }
}

/// Forward: ctx (rows x hidden) from qkv (rows x 3 hidden), and lse (rows x heads).
pub fn forward(
    blas: &Blas,
    qkv: &[f32],
    p: &Packed,
    a: Heads,
    mask: Option<&Mask>,
    ctx: &mut [f32],
    lse: &mut [f32],
) -> Result<()> {
    let (h3, h) = (3 * a.hidden(), a.hidden());
    let (cp, lp) = (Shared(ctx.as_mut_ptr()), Shared(lse.as_mut_ptr()));
    let task = |(item, head): (usize, usize)| -> Result<()> {
        let (r0, n) = (p.offsets[item], p.lens[item]);
        let c = head * a.dim;
        let (q, k, v) = (&qkv[r0 * h3 + c..], &qkv[r0 * h3 + h + c..], &qkv[r0 * h3 + 2 * h + c..]);
        let mut s = vec![0f32; n * n];
        blas.gemm(NO_TRANS, TRANS, n, n, a.dim, q, h3, k, h3, 0.0, &mut s, n)?;
        let mut l = vec![0f32; n];
        softmax_rows(&mut s, n, a.scale, &mut l);
        if let Some(m) = mask {
            for (i, row) in s.chunks_exact_mut(n).enumerate() {
                super::rows::dropout_row(m, mask_row(r0 + i, head, a.heads), row);
            }
        }
        let mut out = vec![0f32; n * a.dim];
        blas.gemm(NO_TRANS, NO_TRANS, n, a.dim, n, &s, n, v, h3, 0.0, &mut out, a.dim)?;
        // SAFETY: this task alone owns rows r0..r0+n of columns c..c+dim, and of lse column head
        unsafe {
            cp.put(&out, r0, c, a.dim, h);
            for (i, &x) in l.iter().enumerate() {
                *lp.at((r0 + i) * a.heads + head) = x;
            }
        }
        Ok(())
    };
    run(p, a.heads, task)
}

/// Backward: dqkv (rows x 3 hidden) from dctx, with the forward's qkv, ctx and lse.
#[allow(clippy::too_many_arguments)]
pub fn backward(
    blas: &Blas,
    qkv: &[f32],
    ctx: &[f32],
    lse: &[f32],
    dctx: &[f32],
    p: &Packed,
    a: Heads,
    mask: Option<&Mask>,
    dqkv: &mut [f32],
) -> Result<()> {
    let (h3, h) = (3 * a.hidden(), a.hidden());
    let dp = Shared(dqkv.as_mut_ptr());
    let task = |(item, head): (usize, usize)| -> Result<()> {
        let (r0, n, d) = (p.offsets[item], p.lens[item], a.dim);
        let c = head * d;
        let (q, k, v) = (&qkv[r0 * h3 + c..], &qkv[r0 * h3 + h + c..], &qkv[r0 * h3 + 2 * h + c..]);
        let dc = &dctx[r0 * h + c..];
        // P from the scores and the saved log-sum-exp
        let mut pm = vec![0f32; n * n];
        blas.gemm(NO_TRANS, TRANS, n, n, d, q, h3, k, h3, 0.0, &mut pm, n)?;
        for (i, row) in pm.chunks_exact_mut(n).enumerate() {
            let l = lse[(r0 + i) * a.heads + head];
            for x in row.iter_mut() {
                *x = exp_f32(*x * a.scale - l);
            }
        }
        // dPd = dC V^T
        let mut ds = vec![0f32; n * n];
        blas.gemm(NO_TRANS, TRANS, n, n, d, dc, h, v, h3, 0.0, &mut ds, n)?;
        // D_i = dC_i . C_i
        let dsum: Vec<f32> = (0..n)
            .map(|i| {
                let (x, y) = (&dc[i * h..i * h + d], &ctx[(r0 + i) * h + c..(r0 + i) * h + c + d]);
                x.iter().zip(y).map(|(a, b)| a * b).sum()
            })
            .collect();
        let mut dv = vec![0f32; n * d];
        match mask {
            Some(m) => {
                // dV = Pd^T dC with Pd = P * mask: the mask applied to a copy of P
                let mut pd = pm.clone();
                for (i, (prow, drow)) in pd.chunks_exact_mut(n).zip(ds.chunks_exact_mut(n)).enumerate() {
                    let key = m.row_key(mask_row(r0 + i, head, a.heads));
                    for j in 0..n {
                        let f = m.factor(key, j as u32);
                        prow[j] *= f;
                        drow[j] *= f;
                    }
                }
                blas.gemm(TRANS, NO_TRANS, n, d, n, &pd, n, dc, h, 0.0, &mut dv, d)?;
            }
            None => blas.gemm(TRANS, NO_TRANS, n, d, n, &pm, n, dc, h, 0.0, &mut dv, d)?,
        }
        // dS = scale * P * (dP - D), in ds
        for (i, (drow, prow)) in ds.chunks_exact_mut(n).zip(pm.chunks_exact(n)).enumerate() {
            for (x, &pv) in drow.iter_mut().zip(prow) {
                *x = a.scale * pv * (*x - dsum[i]);
            }
        }
        let (mut dq, mut dk) = (vec![0f32; n * d], vec![0f32; n * d]);
        blas.gemm(NO_TRANS, NO_TRANS, n, d, n, &ds, n, k, h3, 0.0, &mut dq, d)?;
        blas.gemm(TRANS, NO_TRANS, n, d, n, &ds, n, q, h3, 0.0, &mut dk, d)?;
        // SAFETY: this task alone owns rows r0..r0+n of its head's q, k and v columns
        unsafe {
            dp.put(&dq, r0, c, d, h3);
            dp.put(&dk, r0, h + c, d, h3);
            dp.put(&dv, r0, 2 * h + c, d, h3);
        }
        Ok(())
    };
    run(p, a.heads, task)
}

/// Every (item, head) task, in parallel where the caller is not itself a training thread (whose
/// BLAS is serial); the BLAS runs serially inside parallel tasks.
fn run(p: &Packed, heads: usize, task: impl Fn((usize, usize)) -> Result<()> + Sync) -> Result<()> {
    let units: Vec<(usize, usize)> = (0..p.lens.len())
        .flat_map(|i| (0..heads).map(move |h| (i, h)))
        .filter(|&(i, _)| p.lens[i] > 0)
        .collect();
    if parallel() && units.len() > 1 {
        crate::model::kernels::blas::serial(|| units.par_iter().try_for_each(|&u| task(u)))
    } else {
        units.iter().try_for_each(|&u| task(u))
    }
}
