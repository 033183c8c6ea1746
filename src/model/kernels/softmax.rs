//! Softmax, one formula for every path (base 2, `softmax_row`): the engine's attention (a row at a
//! time on the BLAS route, `softmax_block` inside the attention kernel), candle's fused attention
//! op and the fused masked softmax below (all compiled per CPU class through `dispatch!`), each
//! row kept with its log-sum-exp where backward rebuilds it; cross-entropy's rows (`log_sum_exp`,
//! `scaled_softmax`) in the natural base, on the same exp polynomial (fastmath.rs).
//!
//! The masked softmax, softmax(scores * scale + bias) over the last dim as one candle op: attention
//! scores are (b, heads, s, s), 100 MB at s = 256, and the composed form allocates six of them
//! per layer. Backward (scores only; the mask bias is a constant): scale * y * (g - sum(g * y)).
#[cfg(target_arch = "x86_64")]
use super::fastmath::exp2_small_x16;
use super::fastmath::{exp2_small, exp_f32};
use super::vector::{max, sum, LANES};
use crate::dispatch;
use candle_core::{CpuStorage, CustomOp2, DType, Layout, Result, Shape, Tensor, D};
use rayon::prelude::*;

/// One AVX2 vector: `softmax_block`'s exp step a row.
const EXP_LANES: usize = 8;

/// The per-head formula's probability of score `s`: 2^(s scale2 - m2), with scale2 = scale
/// log2(e) and m2 the row's maximum times scale2 (or its log-sum-exp times log2(e), rebuilding).
#[inline(always)]
fn prob(s: f32, scale2: f32, m2: f32) -> f32 {
    exp2_small(s.mul_add(scale2, -m2))
}

/// The row's log-sum-exp of the scaled scores in the natural base: m2 ln(2) + ln(total).
#[inline(always)]
fn lse_of(m2: f32, total: f32) -> f32 {
    m2.mul_add(std::f32::consts::LN_2, total.ln())
}

dispatch! {
    /// A row of attention scores turned into probabilities in place: softmax(row * scale), for
    /// scale > 0. Returns the row's log-sum-exp (of the scaled scores), which backward rebuilds
    /// P from (`probs_row`). Every per-head softmax is this formula: p = 2^(s scale log2(e) - m)
    /// / total with m = max(s) scale log2(e), the scale riding in the exponent's multiply-add,
    /// and lse = m ln(2) + ln(total) (`softmax_block` R rows at a time, the bf16 attention
    /// kernel in AVX-512 vectors).
    pub fn softmax_row(row: &mut [f32], scale: f32) -> f32 {
        debug_assert!(scale > 0.0, "a softmax scale must be positive");
        let scale2 = scale * std::f32::consts::LOG2_E;
        // scale > 0, so the scaled maximum is the maximum scaled (rounding is monotonic)
        let m2 = max(row) * scale2;
        for v in row.iter_mut() {
            *v = prob(*v, scale2, m2);
        }
        let total = sum(row);
        let inv = 1.0 / total;
        for v in row.iter_mut() {
            *v *= inv;
        }
        lse_of(m2, total)
    }
}

dispatch! {
    /// Scores back into probabilities from their log-sum-exp: p = exp(s * scale - lse), in
    /// base 2 as `softmax_row` made them.
    pub fn probs_row(row: &mut [f32], scale: f32, lse: f32) {
        let (scale2, lse2) = (scale * std::f32::consts::LOG2_E, lse * std::f32::consts::LOG2_E);
        for v in row.iter_mut() {
            *v = prob(*v, scale2, lse2);
        }
    }
}

/// The per-head softmax for a block of R score rows (`np` wide, `rows` of them real, keys past
/// `n` padding) turned into unnormalised probabilities in place, exp((s - max) scale) as
/// 2^((s - max) scale log2 e) with `scale2` = scale log2 e, and each real row's log-sum-exp into
/// `lse`; returns each row's
/// 1 / sum, which the caller applies to the context rows (head_attention.rs). Rows past `rows`
/// are computed (a vector column of the block's rows at a time; one row at a time ran 7% slower
/// on 187-token texts: issue 35, Zen 3) but not read. The same formula as `softmax_row`; with
/// `WIDE` (a `dispatch!` body's AVX-512 copy) the exp runs 16 lanes at a time, the same bits.
#[inline(always)]
pub(crate) fn softmax_block<const R: usize, const WIDE: bool>(
    s: &mut [f32],
    np: usize,
    n: usize,
    rows: usize,
    scale2: f32,
    lse: &mut [f32],
) -> [f32; R] {
    assert!(np.is_multiple_of(EXP_LANES) && s.len() >= R * np && rows <= R && n <= np);
    // each row's maximum (the padding keys' scores become -inf: probability 0, so every pass
    // runs over whole vectors); rows past the text's end keep a maximum 0
    let mut m2 = [0f32; R];
    for (r, m) in m2.iter_mut().enumerate().take(rows) {
        let row = &mut s[r * np..(r + 1) * np];
        row[n..].fill(f32::NEG_INFINITY);
        // scale > 0, so the scaled maximum is the maximum scaled (rounding is monotonic); m2's
        // rounding shifts every exponent of the row alike, which the 1 / sum undoes
        *m = max(row) * scale2;
    }
    // the exp up to the last vector holding a key; past it the probabilities are zeros
    let mut ne = n.next_multiple_of(EXP_LANES);
    let s = &mut s[..R * np];
    let mut acc = [[0f32; EXP_LANES]; R];
    #[cfg(target_arch = "x86_64")]
    if WIDE {
        // a 16-lane step past the last 8-lane vector meets padding only (-inf: probability
        // exactly 0, and + 0 leaves a positive sum's bits alone); np is whole 16-lane vectors
        ne = n.next_multiple_of(2 * EXP_LANES);
        debug_assert!(ne <= np);
        // SAFETY: WIDE is true only in dispatch!'s AVX-512 copy, which runs where the CPU has it
        acc = unsafe { exp_rows_x16::<R>(s, np, ne, &m2, scale2) };
    }
    if !WIDE || cfg!(not(target_arch = "x86_64")) {
        for j in (0..ne).step_by(EXP_LANES) {
            for (i, a) in acc.iter_mut().enumerate() {
                let m = m2[i];
                let e = &mut s[i * np + j..i * np + j + EXP_LANES];
                for (a, e) in a.iter_mut().zip(e.iter_mut()) {
                    *e = prob(*e, scale2, m);
                    *a += *e;
                }
            }
        }
    }
    for i in 0..R {
        s[i * np + ne..(i + 1) * np].fill(0.0);
    }
    let mut inv = [0f32; R];
    for r in 0..rows {
        let total: f32 = acc[r].iter().sum();
        inv[r] = 1.0 / total;
        lse[r] = lse_of(m2[r], total);
    }
    inv
}

/// `softmax_block`'s exp pass 16 scores a step (`ne` a multiple of 16) by `exp2_small_x16`, the
/// same bits: each row's 8-lane sum takes the step's low half, then its high half, as the
/// portable loop adds two 8-lane steps (LLVM made scalar code of a 16-lane portable loop that
/// kept that order).
///
/// # Safety
/// AVX512F present.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx512vl")]
unsafe fn exp_rows_x16<const R: usize>(
    s: &mut [f32],
    np: usize,
    ne: usize,
    m2: &[f32; R],
    scale2: f32,
) -> [[f32; EXP_LANES]; R] {
    use std::arch::x86_64::*;
    assert!(ne.is_multiple_of(16) && ne <= np && s.len() >= R * np);
    let s2 = _mm512_set1_ps(scale2);
    // (loops, not `map`: its closures were left as calls in this target-feature function)
    let mut neg_m = [_mm512_setzero_ps(); R];
    for (v, &m) in neg_m.iter_mut().zip(m2) {
        *v = _mm512_set1_ps(-m);
    }
    let mut acc = [_mm256_setzero_ps(); R];
    let p = s.as_mut_ptr();
    for j in (0..ne).step_by(16) {
        for (i, a) in acc.iter_mut().enumerate() {
            let at = p.add(i * np + j);
            let e = exp2_small_x16(_mm512_fmadd_ps(_mm512_loadu_ps(at), s2, neg_m[i]));
            _mm512_storeu_ps(at, e);
            *a = _mm256_add_ps(*a, _mm512_castps512_ps256(e));
            *a = _mm256_add_ps(*a, _mm512_extractf32x8_ps::<1>(e));
        }
    }
    let mut sums = [[0f32; EXP_LANES]; R];
    for (out, a) in sums.iter_mut().zip(acc) {
        _mm256_storeu_ps(out.as_mut_ptr(), a);
    }
    sums
}

dispatch! {
    /// The scores' gradient from the probabilities': ds = scale * p * (dp - d), in place in dp.
    pub fn score_grad_row(dp: &mut [f32], p: &[f32], d: f32, scale: f32) {
        for (g, &q) in dp.iter_mut().zip(p) {
            *g = scale * q * (*g - d);
        }
    }
}

dispatch! {
    /// log(sum(exp(row))), taken from the row's maximum (a classification row's normaliser).
    pub fn log_sum_exp(row: &[f32]) -> f32 {
        let m = max(row);
        let mut acc = [0f32; LANES];
        let mut chunks = row.chunks_exact(LANES);
        for c in &mut chunks {
            for (a, &v) in acc.iter_mut().zip(c) {
                *a += exp_f32(v - m);
            }
        }
        let mut s: f32 = chunks.remainder().iter().map(|&v| exp_f32(v - m)).sum();
        for a in acc {
            s += a;
        }
        m + s.ln()
    }
}

dispatch! {
    /// out = softmax(row) * k, from the row's log-sum-exp (cross-entropy's gradient, less the
    /// one-hot the caller subtracts).
    pub fn scaled_softmax(row: &[f32], lse: f32, k: f32, out: &mut [f32]) {
        for (o, &v) in out.iter_mut().zip(row) {
            *o = exp_f32(v - lse) * k;
        }
    }
}

/// Softmax over the last dimension from differentiable tensor ops (candle's fused
/// softmax_last_dim returns no gradient): exp(x - max) / sum.
pub fn softmax_last_dim(x: &Tensor) -> Result<Tensor> {
    let max = x.max_keepdim(D::Minus1)?;
    let e = x.broadcast_sub(&max)?.exp()?;
    let sum = e.sum_keepdim(D::Minus1)?;
    e.broadcast_div(&sum)
}

struct MaskedSoftmax {
    scale: f32,
}

impl CustomOp2 for MaskedSoftmax {
    fn name(&self) -> &'static str {
        "masked-softmax"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (Some((a0, a1)), Some((b0, b1))) = (l1.contiguous_offsets(), l2.contiguous_offsets())
        else {
            candle_core::bail!("masked-softmax: inputs must be contiguous")
        };
        let x = &s1.as_slice::<f32>()?[a0..a1];
        let bias = &s2.as_slice::<f32>()?[b0..b1];
        let dims = l1.dims();
        let t = dims[dims.len() - 1];
        // bias is (b, 1, 1, t): one row per batch item, shared by its heads * queries rows
        let rows_per_item = x.len() / t / (bias.len() / t);
        let mut y = vec![0f32; x.len()];
        y.par_chunks_mut(t)
            .zip(x.par_chunks(t))
            .enumerate()
            .for_each(|(r, (yr, xr))| {
                let br = &bias[(r / rows_per_item) * t..][..t];
                for ((o, &v), &b) in yr.iter_mut().zip(xr).zip(br) {
                    *o = v * self.scale + b;
                }
                softmax_row(yr, 1.0);
            });
        Ok((CpuStorage::F32(y), l1.shape().clone()))
    }

    fn bwd(
        &self,
        _x: &Tensor,
        _bias: &Tensor,
        y: &Tensor,
        g: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let gy = (g * y)?;
        let dx =
            ((gy.clone() - y.broadcast_mul(&gy.sum_keepdim(D::Minus1)?)?)? * self.scale as f64)?;
        Ok((Some(dx), None))
    }
}

/// softmax(scores * scale + bias), bias (b, 1, 1, t) broadcast over heads and queries.
pub fn masked_softmax(scores: &Tensor, bias: &Tensor, scale: f64) -> Result<Tensor> {
    let fused = scores.device().is_cpu()
        && scores.dtype() == DType::F32
        && bias.dtype() == DType::F32
        && scores.rank() == 4
        && bias.dims() == [scores.dim(0)?, 1, 1, scores.dim(3)?];
    if fused {
        scores.contiguous()?.apply_op2(
            &bias.contiguous()?,
            MaskedSoftmax {
                scale: scale as f32,
            },
        )
    } else {
        softmax_last_dim(&(scores * scale)?.broadcast_add(bias)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var};

    #[test]
    fn fused_equals_composed_forward_and_backward() {
        let dev = Device::Cpu;
        let x = Var::from_tensor(&Tensor::randn(0f32, 3.0, (2, 3, 5, 7), &dev).unwrap()).unwrap();
        // the additive key bias of a batch whose first item has 3 padded keys
        let big = f32::MAX;
        let bias = Tensor::new(&[[0f32, 0., 0., 0., -big, -big, -big], [0.; 7]], &dev)
            .unwrap()
            .reshape((2, 1, 1, 7))
            .unwrap();
        let w = Tensor::randn(0f32, 1.0, (2, 3, 5, 7), &dev).unwrap();
        let fused = masked_softmax(x.as_tensor(), &bias, 0.3).unwrap();
        let composed =
            softmax_last_dim(&(x.as_tensor() * 0.3).unwrap().broadcast_add(&bias).unwrap())
                .unwrap();
        let diff = |a: &Tensor, b: &Tensor| crate::model::kernels::max_abs_diff(a, b).unwrap();
        assert!(diff(&fused, &composed) < 1e-6);
        let masked = fused.narrow(0, 0, 1).unwrap().narrow(3, 4, 3).unwrap();
        assert_eq!(
            masked
                .flatten_all()
                .unwrap()
                .max(0)
                .unwrap()
                .to_scalar::<f32>()
                .unwrap(),
            0.0,
            "padding gets no weight"
        );
        let g1 = (fused * &w).unwrap().sum_all().unwrap().backward().unwrap();
        let g2 = (composed * &w)
            .unwrap()
            .sum_all()
            .unwrap()
            .backward()
            .unwrap();
        assert!(diff(g1.get(&x).unwrap(), g2.get(&x).unwrap()) < 1e-5);
    }
}
