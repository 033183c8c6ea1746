//! LayerNorm as one fused CPU f32 op with its own backward. Composed from tensor ops (as
//! `ops::LayerNorm` does elsewhere) a LayerNorm is about ten graph nodes, and candle's backward
//! allocates, zero-fills and accumulates a gradient buffer for each: with 13 LayerNorms per
//! Condenser forward that was a large share of a training step outside the matmuls.
//! Backward (per row, xhat = (x - mean) * rstd, g = dy * w):
//!   dx = rstd * (g - mean(g) - xhat * mean(g * xhat)),  dw = sum_rows(dy * xhat),  db = sum_rows(dy)
use candle_core::{bail, CpuStorage, CustomOp3, Layout, Result, Shape, Tensor};
use rayon::prelude::*;

/// Rows handled per parallel task; below 4 tasks' worth the op runs on the calling thread
/// (training already runs shards on their own threads).
const ROWS: usize = 64;

fn slice<'a>(s: &'a CpuStorage, l: &Layout) -> Result<&'a [f32]> {
    match l.contiguous_offsets() {
        Some((a, b)) => Ok(&s.as_slice::<f32>()?[a..b]),
        None => bail!("layer-norm: a contiguous input is required"),
    }
}

/// Mean and 1/sqrt(var + eps) of one row.
#[inline]
fn stats(x: &[f32], eps: f32) -> (f32, f32) {
    let n = x.len() as f32;
    let mean = x.iter().sum::<f32>() / n;
    let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / n;
    (mean, 1.0 / (var + eps).sqrt())
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
        let (x, w, b) = (slice(sx, lx)?, slice(sw, lw)?, slice(sb, lb)?);
        let h = w.len();
        let mut y = vec![0f32; x.len()];
        rows_of(&mut y, h, |first, out| {
            for (r, yr) in out.chunks_mut(h).enumerate() {
                let xr = &x[(first + r) * h..(first + r + 1) * h];
                let (mean, rstd) = stats(xr, self.eps);
                for j in 0..h {
                    yr[j] = (xr[j] - mean) * rstd * w[j] + b[j];
                }
            }
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
        let (x, w, dy) = (slice(sx, lx)?, slice(sw, lw)?, slice(sg, lg)?);
        let h = w.len();
        let rows = x.len() / h;
        let mut out = vec![0f32; (rows + 2) * h];
        let (dx, sums) = out.split_at_mut(rows * h);
        // dx per row; dw and db as per-chunk partial sums, added up in chunk order (deterministic)
        let chunk = ROWS * h;
        let partial = |first: usize, dxc: &mut [f32]| -> Vec<f32> {
            let mut acc = vec![0f32; 2 * h];
            let mut xhat = vec![0f32; h];
            for (r, dxr) in dxc.chunks_mut(h).enumerate() {
                let i = first + r;
                let (xr, gr) = (&x[i * h..(i + 1) * h], &dy[i * h..(i + 1) * h]);
                let (mean, rstd) = stats(xr, self.eps);
                let (mut mg, mut mgx) = (0f32, 0f32);
                for j in 0..h {
                    xhat[j] = (xr[j] - mean) * rstd;
                    let g = gr[j] * w[j];
                    mg += g;
                    mgx += g * xhat[j];
                    acc[j] += gr[j] * xhat[j];
                    acc[h + j] += gr[j];
                }
                let (mg, mgx) = (mg / h as f32, mgx / h as f32);
                for j in 0..h {
                    dxr[j] = rstd * (gr[j] * w[j] - mg - xhat[j] * mgx);
                }
            }
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
