//! Multi-head self-attention over packed sequences (item i's tokens are rows off_i .. off_i + n_i,
//! no padding anywhere), memory-efficiently: forward keeps q, k, v, the context and one
//! log-sum-exp per (row, head); the probabilities (batch x heads x L x L) are never stored.
//! Backward recomputes each head's scores, rebuilds P from the log-sum-exp, regenerates the
//! dropout mask from its seed (kernels/dropout_hash.rs), and uses D_i = rowsum(dC_i * C_i) (with
//! dropout, C = (P * mask) V, so sum_j dPd_ij Pd_ij = dC_i . C_i), as FlashAttention does:
//!   dV = Pd^T dC,  dPd = dC V^T,  dS = P * (dPd * mask - D),  dQ = scale dS K,  dK = scale dS^T Q.
//! Each (item, head) is one task with a scratch of 2 n x n; tasks run in parallel unless the
//! caller is already one of several training threads. Without dropout, where it serves, a task's
//! forward is one kernel instead (kernels/head_attention.rs: no n x n buffer, no BLAS call), its
//! products in bf16 for a bf16 inference where AVX512-BF16 serves (kernels/bf16/attention.rs).
use super::super::packed::Packed;
use crate::model::kernels::bf16::attention as bf16_head;
use crate::model::kernels::blas::{self, Blas, NO_TRANS, TRANS};
use crate::model::kernels::dropout_hash::{self as mask, head_row_id, Mask};
use crate::model::kernels::head_attention::{self, HeadIn};
use crate::model::kernels::softmax;
use candle_core::Result;
use rayon::prelude::*;

/// Shapes of one attention: heads, head width, hidden = heads * head width.
#[derive(Clone, Copy, Debug)]
pub struct Heads {
    pub heads: usize,
    pub dim: usize,
    pub scale: f32,
}

/// The precision of the attention's two products.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Products {
    F32,
    /// bf16 where the bf16 kernel serves the head width, f32 elsewhere. Inference only: a
    /// backward recomputes the scores in f32 against the forward's log-sum-exp, which bf16
    /// scores would not match, so the bf16 kernel's heads leave `lse` as it is.
    Bf16,
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
            let dst = self.0.add((r0 + r) * ld + c0);
            if w.is_multiple_of(PUT_CHUNK) {
                // a constant length is copied inline; a row of a head's width (32) by length was
                // a memmove call a row (0.7% of a 256-token encode: issue 35, Zen 3)
                for (i, c) in row.chunks_exact(PUT_CHUNK).enumerate() {
                    std::ptr::copy_nonoverlapping(c.as_ptr(), dst.add(i * PUT_CHUNK), PUT_CHUNK);
                }
            } else {
                std::ptr::copy_nonoverlapping(row.as_ptr(), dst, w);
            }
        }
    }
}

/// Floats a step of `Shared::put`'s copy where the width allows.
const PUT_CHUNK: usize = 16;

thread_local! {
    /// Each thread's working buffers, kept between tasks: a task needs up to 3 n x n and a few
    /// n x head-width buffers, and allocating them per (item, head) made threads queue on the
    /// allocator.
    static SCRATCH: std::cell::RefCell<Vec<Vec<f32>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// `f` with buffers of at least `sizes` floats each (contents unspecified), this thread's own.
fn with_scratch<R>(sizes: &[usize], f: impl FnOnce(&mut [Vec<f32>]) -> R) -> R {
    SCRATCH.with(|cell| {
        let mut bufs = cell.borrow_mut();
        while bufs.len() < sizes.len() {
            bufs.push(Vec::new());
        }
        for (b, &n) in bufs.iter_mut().zip(sizes) {
            if b.len() < n {
                b.resize(n, 0.0);
            }
        }
        f(&mut bufs[..sizes.len()])
    })
}

/// Forward: ctx (rows x hidden) from qkv (rows x 3 hidden), and lse (rows x heads) but for the
/// heads of `Products::Bf16`'s kernel.
#[allow(clippy::too_many_arguments)]
pub fn forward(
    blas: &Blas,
    qkv: &[f32],
    p: &Packed,
    a: Heads,
    mask: Option<&Mask>,
    products: Products,
    ctx: &mut [f32],
    lse: &mut [f32],
) -> Result<()> {
    let (h3, h) = (3 * a.hidden(), a.hidden());
    let (cp, lp) = (Shared(ctx.as_mut_ptr()), Shared(lse.as_mut_ptr()));
    // item's rows of head's q, k and v
    let head_in = |item: usize, head: usize| {
        let (r0, c) = (p.offsets()[item], head * a.dim);
        HeadIn {
            q: &qkv[r0 * h3 + c..],
            k: &qkv[r0 * h3 + h + c..],
            v: &qkv[r0 * h3 + 2 * h + c..],
            ld: h3,
            n: p.lens()[item],
            d: a.dim,
            scale: a.scale,
        }
    };
    // without dropout one kernel does the head (kernels/head_attention.rs), where it serves; in
    // bf16 the bf16 one wherever it serves: since its one-pass softmax it was faster than the f32
    // kernel at every length tried (one head, one thread, d = 32, Zen 4, GFLOP/s f32 against
    // bf16: 9 tokens 15 against 18-19, 14: 21-24 against 28-31, 20: 21-26 against 41, 32: 46-51
    // against 67-72, 48: 55-65 against 75-81; before it, the f32 kernel won below ~40 tokens)
    let bf16 = mask.is_none() && products == Products::Bf16 && bf16_head::serves(a.dim);
    let fused = bf16 || (mask.is_none() && head_attention::serves(a.dim));
    let task = |(item, head): (usize, usize)| -> Result<()> {
        let x = head_in(item, head);
        let (r0, n, c) = (p.offsets()[item], x.n, head * a.dim);
        // SAFETY (both routes' writes): this task alone owns rows r0..r0+n of ctx's columns
        // c..c+dim and of lse's column `head`
        let put_lse = |i: usize, l: f32| unsafe { *lp.at((r0 + i) * a.heads + head) = l };
        if fused {
            // the next task (the next head, or the next item's first) on this thread, as `run`
            // deals them serially; in parallel it may be another thread's, and the hint is lost
            let next = if head + 1 < a.heads {
                Some((item, head + 1))
            } else {
                (item + 1 < p.lens().len()).then_some((item + 1, 0))
            };
            if let Some((ni, nh)) = next {
                head_attention::prefetch_next(&head_in(ni, nh));
            }
            let scratch_len = if bf16 {
                bf16_head::scratch_len(n, a.dim)
            } else {
                head_attention::scratch_len(n, a.dim)
            };
            return with_scratch(&[scratch_len, n * a.dim, n], |b| {
                let [scratch, out, l] = b else { unreachable!() };
                let (out, l) = (&mut out[..n * a.dim], &mut l[..n]);
                if bf16 {
                    // inference only (`Products::Bf16`): no backward reads lse, left as it is
                    bf16_head::head_forward(x, scratch, out);
                } else {
                    head_attention::head_forward(x, scratch, out, l);
                    l.iter().enumerate().for_each(|(i, &li)| put_lse(i, li));
                }
                // SAFETY: as above
                unsafe { cp.put(out, r0, c, a.dim, h) };
                Ok(())
            });
        }
        let HeadIn { q, k, v, .. } = x;
        with_scratch(&[n * n, n * a.dim], |bufs| {
            let [s, out] = bufs else { unreachable!() };
            let (s, out) = (&mut s[..n * n], &mut out[..n * a.dim]);
            blas.gemm(NO_TRANS, TRANS, n, n, a.dim, q, h3, k, h3, 0.0, s, n)?;
            for (i, row) in s.chunks_exact_mut(n).enumerate() {
                put_lse(i, softmax::softmax_row(row, a.scale));
                if let Some(m) = mask {
                    mask::dropout_row(m, head_row_id(p.row_ids()[r0 + i], head), row);
                }
            }
            blas.gemm(
                NO_TRANS, NO_TRANS, n, a.dim, n, s, n, v, h3, 0.0, out, a.dim,
            )?;
            // SAFETY: as above
            unsafe { cp.put(out, r0, c, a.dim, h) };
            Ok(())
        })
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
        let (r0, n, d) = (p.offsets()[item], p.lens()[item], a.dim);
        let c = head * d;
        let (q, k, v) = (
            &qkv[r0 * h3 + c..],
            &qkv[r0 * h3 + h + c..],
            &qkv[r0 * h3 + 2 * h + c..],
        );
        let dc = &dctx[r0 * h + c..];
        with_scratch(&[n * n, n * n, n * n, 3 * n * d, n], |bufs| {
            let [pm, ds, pd, qkv3, dsum] = bufs else {
                unreachable!()
            };
            let (pm, ds, pd) = (&mut pm[..n * n], &mut ds[..n * n], &mut pd[..n * n]);
            let (dq, rest) = qkv3[..3 * n * d].split_at_mut(n * d);
            let (dk, dv) = rest.split_at_mut(n * d);
            // P from the scores and the saved log-sum-exp
            blas.gemm(NO_TRANS, TRANS, n, n, d, q, h3, k, h3, 0.0, pm, n)?;
            for (i, row) in pm.chunks_exact_mut(n).enumerate() {
                softmax::probs_row(row, a.scale, lse[(r0 + i) * a.heads + head]);
            }
            // dPd = dC V^T
            blas.gemm(NO_TRANS, TRANS, n, n, d, dc, h, v, h3, 0.0, ds, n)?;
            // D_i = dC_i . C_i
            for (i, di) in dsum[..n].iter_mut().enumerate() {
                let (x, y) = (
                    &dc[i * h..i * h + d],
                    &ctx[(r0 + i) * h + c..(r0 + i) * h + c + d],
                );
                *di = x.iter().zip(y).map(|(a, b)| a * b).sum();
            }
            match mask {
                Some(m) => {
                    // dV = Pd^T dC with Pd = P * mask; dP = dPd * mask
                    pd.copy_from_slice(pm);
                    for (i, (prow, drow)) in pd
                        .chunks_exact_mut(n)
                        .zip(ds.chunks_exact_mut(n))
                        .enumerate()
                    {
                        mask::dropout_rows2(m, head_row_id(p.row_ids()[r0 + i], head), prow, drow);
                    }
                    blas.gemm(TRANS, NO_TRANS, n, d, n, pd, n, dc, h, 0.0, dv, d)?;
                }
                None => blas.gemm(TRANS, NO_TRANS, n, d, n, pm, n, dc, h, 0.0, dv, d)?,
            }
            // dS = scale * P * (dP - D), in ds
            for (i, (drow, prow)) in ds.chunks_exact_mut(n).zip(pm.chunks_exact(n)).enumerate() {
                softmax::score_grad_row(drow, prow, dsum[i], a.scale);
            }
            blas.gemm(NO_TRANS, NO_TRANS, n, d, n, ds, n, k, h3, 0.0, dq, d)?;
            blas.gemm(TRANS, NO_TRANS, n, d, n, ds, n, q, h3, 0.0, dk, d)?;
            // SAFETY: this task alone owns rows r0..r0+n of its head's q, k and v columns
            unsafe {
                dp.put(dq, r0, c, d, h3);
                dp.put(dk, r0, h + c, d, h3);
                dp.put(dv, r0, 2 * h + c, d, h3);
            }
            Ok(())
        })
    };
    run(p, a.heads, task)
}

/// Every (item, head) task, in parallel where the caller is not itself a training thread (whose
/// BLAS is serial); the BLAS runs serially inside parallel tasks.
fn run(p: &Packed, heads: usize, task: impl Fn((usize, usize)) -> Result<()> + Sync) -> Result<()> {
    let units: Vec<(usize, usize)> = (0..p.lens().len())
        .flat_map(|i| (0..heads).map(move |h| (i, h)))
        .filter(|&(i, _)| p.lens()[i] > 0)
        .collect();
    if units.len() > 1 && blas::may_split() {
        blas::serial(|| units.par_iter().try_for_each(|&u| task(u)))
    } else {
        units.iter().try_for_each(|&u| task(u))
    }
}
