//! Softmax, one row kernel for every path: the engine's attention and cross-entropy, candle's
//! fused attention op and the fused masked softmax below (all compiled per CPU class through
//! `dispatch!`), each row kept with its log-sum-exp where backward rebuilds it.
//!
//! The masked softmax, softmax(scores * scale + bias) over the last dim as one candle op: attention
//! scores are (b, heads, s, s), 100 MB at s = 256, and the composed form allocates six of them
//! per layer. Backward (scores only; the mask bias is a constant): scale * y * (g - sum(g * y)).
use super::fastmath::exp_f32;
use super::vector::{max, sum, LANES};
use crate::dispatch;
use candle_core::{CpuStorage, CustomOp2, DType, Layout, Result, Shape, Tensor, D};
use rayon::prelude::*;

dispatch! {
    /// A row of attention scores turned into probabilities in place: softmax(row * scale).
    /// Returns the row's log-sum-exp (of the scaled scores), which backward rebuilds P from.
    pub fn softmax_row(row: &mut [f32], scale: f32) -> f32 {
        for v in row.iter_mut() {
            *v *= scale;
        }
        let m = max(row);
        for v in row.iter_mut() {
            *v = exp_f32(*v - m);
        }
        let total = sum(row);
        let inv = 1.0 / total;
        for v in row.iter_mut() {
            *v *= inv;
        }
        m + total.ln()
    }
}

dispatch! {
    /// Scores back into probabilities from their log-sum-exp: p = exp(s * scale - lse).
    pub fn probs_row(row: &mut [f32], scale: f32, lse: f32) {
        for v in row.iter_mut() {
            *v = exp_f32(*v * scale - lse);
        }
    }
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
