//! Row-wise kernels of a BERT layer, each compiled per CPU class (`dispatch!`): LayerNorm forward
//! and backward (fused with the residual sum and dropout before it), bias + GELU and its
//! gradient, column sums for bias gradients. Dropout masks are in mask.rs, attention's row
//! kernels in softmax.rs.
//!
//! Floats are summed in 16 independent lanes: the compiler may not reorder a float sum, so a plain
//! loop stays scalar; 16 lanes fill an AVX-512 register (two AVX2, four SSE2).
use super::mask::Mask;
use crate::dispatch;
use crate::model::kernels::fastmath::exp_f32;
use crate::model::kernels::gelu::erf_f32;

pub(super) const LANES: usize = 16;

#[inline(always)]
pub(super) fn sum(x: &[f32]) -> f32 {
    let mut acc = [0f32; LANES];
    let mut chunks = x.chunks_exact(LANES);
    for c in &mut chunks {
        for (a, v) in acc.iter_mut().zip(c) {
            *a += v;
        }
    }
    let mut s: f32 = chunks.remainder().iter().sum();
    for a in acc {
        s += a;
    }
    s
}

#[inline(always)]
pub(super) fn dot(x: &[f32], y: &[f32]) -> f32 {
    let mut acc = [0f32; LANES];
    let (cx, cy) = (x.chunks_exact(LANES), y.chunks_exact(LANES));
    let (rx, ry) = (cx.remainder(), cy.remainder());
    for (a, b) in cx.zip(cy) {
        for i in 0..LANES {
            acc[i] += a[i] * b[i];
        }
    }
    let mut s: f32 = rx.iter().zip(ry).map(|(a, b)| a * b).sum();
    for a in acc {
        s += a;
    }
    s
}

dispatch! {
    /// Forward of `out = LayerNorm(drop(a) + res)` over rows of width h, keeping what backward
    /// needs: xhat (normalised input) and 1/std per row. `rows0` is the first row's index (for
    /// the dropout hash). `a` may be `res`-free (None): then z = drop(a).
    #[allow(clippy::too_many_arguments)]
    pub fn residual_norm(
        a: &[f32],
        res: Option<&[f32]>,
        mask: Option<&Mask>,
        rows0: u64,
        gamma: &[f32],
        beta: &[f32],
        eps: f32,
        out: &mut [f32],
        xhat: &mut [f32],
        rstd: &mut [f32],
    ) {
        let h = gamma.len();
        for (r, ((o, xh), rs)) in out
            .chunks_exact_mut(h)
            .zip(xhat.chunks_exact_mut(h))
            .zip(rstd.iter_mut())
            .enumerate()
        {
            let ar = &a[r * h..(r + 1) * h];
            // z into xhat's row, then normalised in place
            match mask {
                Some(m) => {
                    let key = m.row_key(rows0 + r as u64);
                    for j in 0..h {
                        xh[j] = ar[j] * m.factor(key, j as u32);
                    }
                }
                None => xh.copy_from_slice(ar),
            }
            if let Some(res) = res {
                for (x, v) in xh.iter_mut().zip(&res[r * h..(r + 1) * h]) {
                    *x += v;
                }
            }
            let mean = sum(xh) / h as f32;
            for x in xh.iter_mut() {
                *x -= mean;
            }
            let var = dot(xh, xh) / h as f32;
            let inv = 1.0 / (var + eps).sqrt();
            *rs = inv;
            for j in 0..h {
                xh[j] *= inv;
                o[j] = xh[j] * gamma[j] + beta[j];
            }
        }
    }
}

dispatch! {
    /// Backward of `residual_norm` over rows: from dy (the output's gradient) the gradient of z
    /// (= of the residual input) into `dz`, and of the dropped input into `da` (dz times the same
    /// mask, or dz where none); dgamma and dbeta accumulate the column sums.
    #[allow(clippy::too_many_arguments)]
    pub fn residual_norm_backward(
        dy: &[f32],
        xhat: &[f32],
        rstd: &[f32],
        gamma: &[f32],
        mask: Option<&Mask>,
        rows0: u64,
        dz: &mut [f32],
        da: Option<&mut [f32]>,
        dgamma: &mut [f32],
        dbeta: &mut [f32],
    ) {
        let h = gamma.len();
        let mut g = vec![0f32; h];
        for (r, (dzr, &rs)) in dz.chunks_exact_mut(h).zip(rstd).enumerate() {
            let (dyr, xh) = (&dy[r * h..(r + 1) * h], &xhat[r * h..(r + 1) * h]);
            for j in 0..h {
                g[j] = dyr[j] * gamma[j];
                dgamma[j] += dyr[j] * xh[j];
                dbeta[j] += dyr[j];
            }
            let m1 = sum(&g) / h as f32;
            let m2 = dot(&g, xh) / h as f32;
            for j in 0..h {
                dzr[j] = rs * (g[j] - m1 - xh[j] * m2);
            }
        }
        if let Some(da) = da {
            match mask {
                Some(m) => {
                    for (r, (dar, dzr)) in da.chunks_exact_mut(h).zip(dz.chunks_exact(h)).enumerate() {
                        let key = m.row_key(rows0 + r as u64);
                        for j in 0..h {
                            dar[j] = dzr[j] * m.factor(key, j as u32);
                        }
                    }
                }
                None => da.copy_from_slice(dz),
            }
        }
    }
}

/// GELU (erf form): x Phi(x).
#[inline(always)]
fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf_f32(x * std::f32::consts::FRAC_1_SQRT_2))
}

/// GELU's derivative: Phi(x) + x phi(x).
#[inline(always)]
fn gelu_grad(x: f32) -> f32 {
    let cdf = 0.5 * (1.0 + erf_f32(x * std::f32::consts::FRAC_1_SQRT_2));
    let pdf = exp_f32(-0.5 * x * x) * 0.398_942_3;
    cdf + x * pdf
}

dispatch! {
    /// out = gelu(u), element by element.
    pub fn gelu_into(u: &[f32], out: &mut [f32]) {
        for (o, &x) in out.iter_mut().zip(u) {
            *o = gelu(x);
        }
    }
}

dispatch! {
    /// d *= gelu'(u): the gradient through GELU, in place.
    pub fn gelu_backward(u: &[f32], d: &mut [f32]) {
        for (g, &x) in d.iter_mut().zip(u) {
            *g *= gelu_grad(x);
        }
    }
}

dispatch! {
    /// acc[j] += sum over rows of d[r * n + j] (a bias gradient).
    pub fn add_column_sums(d: &[f32], acc: &mut [f32]) {
        let n = acc.len();
        for row in d.chunks_exact(n) {
            for (a, v) in acc.iter_mut().zip(row) {
                *a += v;
            }
        }
    }
}

dispatch! {
    /// Every row of `out` (width b.len()) set to the bias `b`: a GEMM then adds x W^T (beta 1).
    pub fn fill_rows(out: &mut [f32], b: &[f32]) {
        for row in out.chunks_exact_mut(b.len()) {
            row.copy_from_slice(b);
        }
    }
}

dispatch! {
    /// y += x.
    pub fn add_into(y: &mut [f32], x: &[f32]) {
        for (a, b) in y.iter_mut().zip(x) {
            *a += b;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::engine::mask::dropout_row;
    use crate::model::kernels::isa::{detected, Isa};

    fn data(n: usize, seed: u32) -> Vec<f32> {
        (0..n as u32)
            .map(|i| ((i.wrapping_mul(2654435761) ^ seed) % 2001) as f32 / 1000.0 - 1.0)
            .collect()
    }

    /// Every copy of every row kernel this CPU can run gives the baseline copy's floats exactly
    /// (same operations in the same order, only wider registers); a class the CPU lacks is named.
    #[test]
    fn every_cpu_class_equals_the_baseline_bit_for_bit() {
        let (rows, h) = (7, 384);
        let (a, res, g, b) = (data(rows * h, 1), data(rows * h, 2), data(h, 3), data(h, 4));
        let mask = Mask::new(42, 0.1);
        let run = |isa: Isa| {
            let (mut out, mut xhat, mut rstd) =
                (vec![0f32; rows * h], vec![0f32; rows * h], vec![0f32; rows]);
            residual_norm::at(
                isa,
                &a,
                Some(&res),
                mask.as_ref(),
                3,
                &g,
                &b,
                1e-12,
                &mut out,
                &mut xhat,
                &mut rstd,
            );
            let (mut dz, mut da, mut dg, mut db) = (
                vec![0f32; rows * h],
                vec![0f32; rows * h],
                vec![0f32; h],
                vec![0f32; h],
            );
            residual_norm_backward::at(
                isa,
                &res,
                &xhat,
                &rstd,
                &g,
                mask.as_ref(),
                3,
                &mut dz,
                Some(&mut da),
                &mut dg,
                &mut db,
            );
            let mut gl = vec![0f32; rows * h];
            gelu_into::at(isa, &a, &mut gl);
            let mut dgl = res.clone();
            gelu_backward::at(isa, &a, &mut dgl);
            let mut cs = vec![0f32; h];
            add_column_sums::at(isa, &a, &mut cs);
            let mut dr = a.clone();
            dropout_row::at(isa, mask.as_ref().unwrap(), 9, &mut dr);
            [out, xhat, rstd, dz, da, dg, db, gl, dgl, cs, dr]
        };
        let base = run(Isa::Baseline);
        for isa in [Isa::Avx2, Isa::Avx512] {
            if detected() < isa {
                crate::runtime::skipped(
                    &format!("row kernels at {}", isa.name()),
                    &format!("this CPU's widest class is {}", detected().name()),
                );
                continue;
            }
            for (k, (x, y)) in run(isa).iter().zip(&base).enumerate() {
                assert!(
                    x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits()),
                    "{} output {k}",
                    isa.name()
                );
            }
        }
    }

    /// The dropout mask keeps about 1 - p, scales kept values by 1 / (1 - p), and is the same
    /// for the same (seed, row, column) and different for another seed.
    #[test]
    fn dropout_masks_are_seeded_and_unbiased() {
        let m = Mask::new(7, 0.1).unwrap();
        let mut ones = vec![1f32; 100_000];
        dropout_row(&m, 5, &mut ones);
        let kept = ones.iter().filter(|&&v| v > 0.0).count() as f64 / 1e5;
        assert!((kept - 0.9).abs() < 0.005, "kept {kept}");
        assert!(ones
            .iter()
            .all(|&v| v == 0.0 || (v - 1.0 / 0.9).abs() < 1e-6));
        let mut again = vec![1f32; 100_000];
        dropout_row(&m, 5, &mut again);
        assert_eq!(ones, again);
        let mut other = vec![1f32; 100_000];
        dropout_row(&Mask::new(8, 0.1).unwrap(), 5, &mut other);
        assert_ne!(ones, other);
        assert!(Mask::new(7, 0.0).is_none());
    }
}
