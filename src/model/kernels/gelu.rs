//! GELU (erf form, BERT's "gelu"), one definition for both CPU paths: a fused op in candle's graph
//! and the engine's row kernels (compiled per CPU class). candle evaluates erf with scalar libm
//! calls, which cost more than all of BERT's matmuls together on BLAS; this rational
//! approximation (the single-precision one XLA and Eigen use, a few ulp) vectorizes.
//! Backward: Phi(x) + x phi(x).
use super::contiguous_f32;
use super::fastmath::exp_f32;
use crate::dispatch;
use candle_core::{CpuStorage, CustomOp1, DType, Layout, Result, Shape, Tensor};
use rayon::prelude::*;

/// erf(x) in f32 as x P(x^2) / Q(x^2) on [-4, 4] (beyond that erf is +-1 in f32).
#[inline(always)]
pub fn erf_f32(x: f32) -> f32 {
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let p = (-2.726_142_3e-10_f32)
        .mul_add(x2, 2.770_681_4e-8)
        .mul_add(x2, -2.101_024e-6)
        .mul_add(x2, -5.692_506_4e-5)
        .mul_add(x2, -7.349_906_3e-4)
        .mul_add(x2, -2.954_600_1e-3)
        .mul_add(x2, -1.609_603_3e-2)
        * x;
    let q = (-1.456_607_2e-5_f32)
        .mul_add(x2, -2.133_740_6e-4)
        .mul_add(x2, -1.682_827e-3)
        .mul_add(x2, -7.373_329_3e-3)
        .mul_add(x2, -1.426_474e-2);
    p / q
}

const CHUNK: usize = 16 * 1024;

/// `kernel(x, y)` over `x` in chunks (on every thread where large), `y` starting at `init`: the
/// candle ops run the same dispatched row kernels as the engine (outside a CPU class's copy the
/// fused multiply-adds of erf and exp would each be a libm call).
fn map(x: &[f32], init: f32, kernel: impl Fn(&[f32], &mut [f32]) + Sync) -> Vec<f32> {
    let mut y = vec![init; x.len()];
    if x.len() >= 4 * CHUNK {
        x.par_chunks(CHUNK)
            .zip(y.par_chunks_mut(CHUNK))
            .for_each(|(xs, ys)| kernel(xs, ys));
    } else {
        kernel(x, &mut y);
    }
    y
}

/// GELU (erf form): x Phi(x).
#[inline(always)]
pub fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf_f32(x * std::f32::consts::FRAC_1_SQRT_2))
}

/// GELU's derivative: Phi(x) + x phi(x).
#[inline(always)]
pub fn gelu_grad(x: f32) -> f32 {
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
    /// u = gelu(u) in place (inference: the GELU input is not kept).
    pub fn gelu_in_place(u: &mut [f32]) {
        for x in u.iter_mut() {
            *x = gelu(*x);
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

struct Gelu;
struct GeluGrad;

impl CustomOp1 for Gelu {
    fn name(&self) -> &'static str {
        "gelu-erf"
    }
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        Ok((
            CpuStorage::F32(map(contiguous_f32(s, l, "gelu")?, 0.0, gelu_into)),
            l.shape().clone(),
        ))
    }
    fn bwd(&self, x: &Tensor, _res: &Tensor, g: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(g.mul(&x.apply_op1_no_bwd(&GeluGrad)?)?))
    }
}

impl CustomOp1 for GeluGrad {
    fn name(&self) -> &'static str {
        "gelu-erf-grad"
    }
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        Ok((
            CpuStorage::F32(map(contiguous_f32(s, l, "gelu")?, 1.0, gelu_backward)),
            l.shape().clone(),
        ))
    }
}

/// GELU (erf form), fused on CPU f32, candle's own elsewhere.
pub fn gelu_erf(x: &Tensor) -> Result<Tensor> {
    if x.device().is_cpu() && x.dtype() == DType::F32 {
        x.contiguous()?.apply_op1(Gelu)
    } else {
        x.gelu_erf()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_approximation_is_accurate_to_float_precision() {
        let mut worst = 0f64;
        for i in -80_000..=80_000 {
            let x = i as f64 / 10_000.0;
            worst = worst.max((erf_f32(x as f32) as f64 - libm_erf(x)).abs());
        }
        assert!(worst < 5e-7, "max |erf error| {worst}");
    }

    fn libm_erf(x: f64) -> f64 {
        // erf via its Taylor series for |x| < 3 and the continued fraction of erfc beyond: f64
        // reference, independent of the approximation under test
        if x.abs() < 3.0 {
            let (mut term, mut sum, x2) = (x, x, x * x);
            for n in 1..200 {
                term *= -x2 / n as f64;
                sum += term / (2 * n + 1) as f64;
            }
            sum * 2.0 / std::f64::consts::PI.sqrt()
        } else {
            let t = x.abs();
            let mut f = 0.0;
            for k in (1..60).rev() {
                f = (k as f64 / 2.0) / (t + f);
            }
            let erfc = (-t * t).exp() / std::f64::consts::PI.sqrt() / (t + f);
            (1.0 - erfc) * x.signum()
        }
    }

    #[test]
    fn forward_and_backward_match_candle() {
        let dev = candle_core::Device::Cpu;
        let x = candle_core::Var::from_vec(
            (-300..300).map(|i| i as f32 / 50.0).collect::<Vec<_>>(),
            600,
            &dev,
        )
        .unwrap();
        let ours = gelu_erf(x.as_tensor()).unwrap();
        let theirs = x.as_tensor().gelu_erf().unwrap();
        let d = crate::model::kernels::max_abs_diff(&ours, &theirs).unwrap();
        assert!(d < 1e-6, "forward {d}");
        let g1 = ours.sqr().unwrap().sum_all().unwrap().backward().unwrap();
        let g2 = theirs.sqr().unwrap().sum_all().unwrap().backward().unwrap();
        let (a, b) = (g1.get(&x).unwrap(), g2.get(&x).unwrap());
        let d = crate::model::kernels::max_abs_diff(a, b).unwrap();
        assert!(d < 1e-5, "backward {d}");
    }
}
