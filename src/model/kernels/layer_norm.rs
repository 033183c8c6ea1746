//! LayerNorm, one row kernel for both CPU paths: the engine's (fused with the residual sum and
//! dropout before it, compiled per CPU class) and a fused op in candle's graph built on the same
//! kernel. Composed from tensor ops (as `ops::LayerNorm` does elsewhere) a LayerNorm is about ten
//! graph nodes, and candle's backward allocates, zero-fills and accumulates a gradient buffer for
//! each: with 13 LayerNorms per Condenser forward that was a large share of a training step
//! outside the matmuls.
//! Backward (per row, xhat = (x - mean) * rstd, g = dy * w):
//!   dx = rstd * (g - mean(g) - xhat * mean(g * xhat)),  dw = sum_rows(dy * xhat),  db = sum_rows(dy)
use super::contiguous_f32;
use super::dropout_hash::Mask;
use super::vector::{dot, sum};
use crate::dispatch;
use candle_core::{CpuStorage, CustomOp3, Layout, Result, Shape, Tensor};
use rayon::prelude::*;

/// Rows handled per parallel task; below 4 tasks' worth the op runs on the calling thread
/// (training already runs shards on their own threads).
const ROWS: usize = 64;

/// The `xhat` and `rstd` buffers `residual_norm` writes for `rows` rows of width `h`: whole
/// where backward will read them (`keep`), else one row of scratch and no rstd (inference: the
/// whole pair was two more buffers a LayerNorm to allocate, zero and write, ~1.5% of an encode).
pub fn norm_buffers(rows: usize, h: usize, keep: bool) -> (Vec<f32>, Vec<f32>) {
    if keep {
        (vec![0f32; rows * h], vec![0f32; rows])
    } else {
        (vec![0f32; h], Vec::new())
    }
}

dispatch! {
    /// Forward of `out = LayerNorm(drop(a) + res)` over rows of width h, keeping what backward
    /// needs: xhat (normalised input) and 1/std per row, or, where `rstd` is empty, nothing
    /// (`xhat` is then one row of scratch: `norm_buffers`). `row_ids` are the rows' dropout
    /// identities (read only with a mask). `res` may be None: then z = drop(a).
    #[allow(clippy::too_many_arguments)]
    pub fn residual_norm(
        a: &[f32],
        res: Option<&[f32]>,
        mask: Option<&Mask>,
        row_ids: &[u64],
        gamma: &[f32],
        beta: &[f32],
        eps: f32,
        out: &mut [f32],
        xhat: &mut [f32],
        rstd: &mut [f32],
    ) {
        let h = gamma.len();
        let keep = !rstd.is_empty();
        assert!(
            out.is_empty()
                || if keep {
                    xhat.len() == out.len() && rstd.len() * h == out.len()
                } else {
                    xhat.len() >= h
                }
        );
        for (r, o) in out.chunks_exact_mut(h).enumerate() {
            let xh = if keep {
                &mut xhat[r * h..(r + 1) * h]
            } else {
                &mut xhat[..h]
            };
            let ar = &a[r * h..(r + 1) * h];
            let rr = res.map(|s| &s[r * h..(r + 1) * h]);
            // z into xhat's row, then normalised in place
            match (mask, rr) {
                (Some(m), _) => {
                    let key = m.row_key(row_ids[r]);
                    for j in 0..h {
                        xh[j] = ar[j] * m.factor(key, j as u32);
                    }
                    if let Some(rr) = rr {
                        for (x, v) in xh.iter_mut().zip(rr) {
                            *x += v;
                        }
                    }
                }
                (None, Some(rr)) => {
                    for ((x, &u), &v) in xh.iter_mut().zip(ar).zip(rr) {
                        *x = u + v;
                    }
                }
                (None, None) => xh.copy_from_slice(ar),
            }
            let mean = sum(xh) / h as f32;
            for x in xh.iter_mut() {
                *x -= mean;
            }
            let var = dot(xh, xh) / h as f32;
            let inv = 1.0 / (var + eps).sqrt();
            if keep {
                rstd[r] = inv;
            }
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
        row_ids: &[u64],
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
                        let key = m.row_key(row_ids[r]);
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

/// Run `f` over row chunks of `out` (and the matching input rows), in parallel when large.
fn rows_of<F>(out: &mut [f32], h: usize, f: F)
where
    F: Fn(usize, &mut [f32]) + Sync,
{
    let chunk = ROWS * h;
    if out.len() >= 4 * chunk {
        out.par_chunks_mut(chunk)
            .enumerate()
            .for_each(|(c, o)| f(c * ROWS, o));
    } else {
        f(0, out);
    }
}

struct Fwd {
    eps: f32,
}

impl CustomOp3 for Fwd {
    fn name(&self) -> &'static str {
        "layer-norm"
    }

    fn cpu_fwd(
        &self,
        sx: &CpuStorage,
        lx: &Layout,
        sw: &CpuStorage,
        lw: &Layout,
        sb: &CpuStorage,
        lb: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (x, w, b) = (
            contiguous_f32(sx, lx, "layer-norm")?,
            contiguous_f32(sw, lw, "layer-norm")?,
            contiguous_f32(sb, lb, "layer-norm")?,
        );
        let h = w.len();
        let mut y = vec![0f32; x.len()];
        rows_of(&mut y, h, |first, out| {
            let n = out.len() / h;
            // backward recomputes them from x (below)
            let (mut xhat, mut rstd) = norm_buffers(n, h, false);
            let xs = &x[first * h..(first + n) * h];
            residual_norm(
                xs,
                None,
                None,
                &[],
                w,
                b,
                self.eps,
                out,
                &mut xhat,
                &mut rstd,
            );
        });
        Ok((CpuStorage::F32(y), lx.shape().clone()))
    }

    fn bwd(
        &self,
        x: &Tensor,
        w: &Tensor,
        _b: &Tensor,
        _res: &Tensor,
        dy: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let h = w.elem_count();
        let rows = x.elem_count() / h.max(1);
        let all = x.apply_op3(w, &dy.contiguous()?, Bwd { eps: self.eps })?;
        Ok((
            Some(all.narrow(0, 0, rows)?.reshape(x.shape())?),
            Some(all.narrow(0, rows, 1)?.reshape(h)?),
            Some(all.narrow(0, rows + 1, 1)?.reshape(h)?),
        ))
    }
}

/// dx (rows, h), then dw and db as two more rows.
struct Bwd {
    eps: f32,
}

impl CustomOp3 for Bwd {
    fn name(&self) -> &'static str {
        "layer-norm-backward"
    }

    fn cpu_fwd(
        &self,
        sx: &CpuStorage,
        lx: &Layout,
        sw: &CpuStorage,
        lw: &Layout,
        sg: &CpuStorage,
        lg: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (x, w, dy) = (
            contiguous_f32(sx, lx, "layer-norm")?,
            contiguous_f32(sw, lw, "layer-norm")?,
            contiguous_f32(sg, lg, "layer-norm")?,
        );
        let h = w.len();
        let rows = x.len() / h;
        let mut out = vec![0f32; (rows + 2) * h];
        let (dx, sums) = out.split_at_mut(rows * h);
        // dx per row; dw and db as per-chunk partial sums, added up in chunk order (deterministic)
        let chunk = ROWS * h;
        let zeros = vec![0f32; h];
        let partial = |first: usize, dxc: &mut [f32]| -> Vec<f32> {
            // the forward again for xhat and 1/std (candle keeps only x), then its backward
            let n = dxc.len() / h;
            let (xs, dys) = (
                &x[first * h..(first + n) * h],
                &dy[first * h..(first + n) * h],
            );
            let (mut y, mut xhat, mut rstd) = (vec![0f32; n * h], vec![0f32; n * h], vec![0f32; n]);
            residual_norm(
                xs,
                None,
                None,
                &[],
                w,
                &zeros,
                self.eps,
                &mut y,
                &mut xhat,
                &mut rstd,
            );
            let mut acc = vec![0f32; 2 * h];
            let (dw, db) = acc.split_at_mut(h);
            residual_norm_backward(dys, &xhat, &rstd, w, None, &[], dxc, None, dw, db);
            acc
        };
        let parts: Vec<Vec<f32>> = if dx.len() >= 4 * chunk {
            dx.par_chunks_mut(chunk)
                .enumerate()
                .map(|(c, d)| partial(c * ROWS, d))
                .collect()
        } else {
            vec![partial(0, dx)]
        };
        for p in parts {
            for (s, v) in sums.iter_mut().zip(p) {
                *s += v;
            }
        }
        Ok((CpuStorage::F32(out), Shape::from((rows + 2, h))))
    }
}

/// LayerNorm of `x` (.., h) with weight and bias (h), fused; CPU f32 only (see `usable`). Any
/// leading dims: the op reads x as rows of h, so no reshape nodes join the graph.
pub fn layer_norm(x: &Tensor, w: &Tensor, b: &Tensor, eps: f64) -> Result<Tensor> {
    x.contiguous()?
        .apply_op3(&w.contiguous()?, &b.contiguous()?, Fwd { eps: eps as f32 })
}

/// Whether the fused op applies: every tensor on the CPU in f32.
pub fn usable(x: &Tensor, w: &Tensor, b: &Tensor) -> bool {
    [x, w, b]
        .iter()
        .all(|t| t.device().is_cpu() && t.dtype() == candle_core::DType::F32)
        && x.elem_count() > 0
}
