//! Finite-difference gradient checks. The fused CPU ops only run in f32, so the check does too:
//! central differences of a seeded random projection sum(w * f(x)), at sampled coordinates, compared with
//! autograd by relative error |a - n| / max(|a| + |n|, floor).
use candle_core::{Result, Tensor, Var};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

pub struct GradCheck {
    /// Step of the central difference.
    pub eps: f64,
    /// Coordinates sampled per input.
    pub samples: usize,
    /// Gradients smaller than this are compared absolutely.
    pub floor: f64,
}

impl Default for GradCheck {
    fn default() -> Self {
        GradCheck {
            eps: 1e-2,
            samples: 24,
            floor: 1e-2,
        }
    }
}

impl GradCheck {
    /// The worst relative error over all checked coordinates of all inputs.
    pub fn run(&self, inputs: &[Tensor], f: impl Fn(&[Tensor]) -> Result<Tensor>) -> Result<f64> {
        let vars: Vec<Var> = inputs.iter().map(Var::from_tensor).collect::<Result<_>>()?;
        let ts: Vec<Tensor> = vars.iter().map(|v| v.as_tensor().clone()).collect();
        let out = f(&ts)?;
        let mut rng = StdRng::seed_from_u64(7);
        let wv: Vec<f32> = (0..out.elem_count())
            .map(|_| rng.random::<f32>() * 2.0 - 1.0)
            .collect();
        let w = Tensor::from_vec(wv, out.shape(), out.device())?;
        let loss = |xs: &[Tensor]| -> Result<f64> {
            f(xs)?
                .mul(&w)?
                .sum_all()?
                .to_dtype(candle_core::DType::F64)?
                .to_scalar::<f64>()
        };
        let grads = out.mul(&w)?.sum_all()?.backward()?;
        let mut worst = 0f64;
        for (i, v) in vars.iter().enumerate() {
            let analytic: Vec<f32> = match grads.get(v) {
                Some(g) => g.flatten_all()?.to_vec1()?,
                None => vec![0.0; v.elem_count()],
            };
            let base: Vec<f32> = v.flatten_all()?.to_vec1()?;
            for _ in 0..self.samples.min(base.len()) {
                let k = rng.random_range(0..base.len());
                let eval = |delta: f64| -> Result<f64> {
                    let mut x = base.clone();
                    x[k] = (x[k] as f64 + delta) as f32;
                    let mut xs = ts.clone();
                    xs[i] = Tensor::from_vec(x, v.shape(), v.device())?;
                    loss(&xs)
                };
                let numeric = (eval(self.eps)? - eval(-self.eps)?) / (2.0 * self.eps);
                let a = analytic[k] as f64;
                worst = worst.max((a - numeric).abs() / (a.abs() + numeric.abs()).max(self.floor));
            }
        }
        Ok(worst)
    }
}
