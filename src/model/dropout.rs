//! Dropout with masks from a seeded RNG: candle's own draws from an RNG that cannot be seeded,
//! and a training run must be reproducible bit for bit on CPU (and resumable: the trainer
//! re-seeds from (seed, step), so no RNG state needs saving).
use candle_core::{Result, Tensor};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::Mutex;

pub struct Dropout {
    pub p: f32,
    rng: Mutex<StdRng>,
}

impl Dropout {
    pub fn new(p: f32, seed: u64) -> Dropout {
        Dropout {
            p,
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
        }
    }

    /// x * mask / (1 - p), mask ~ Bernoulli(1 - p).
    pub fn apply(&self, x: &Tensor) -> Result<Tensor> {
        if self.p <= 0.0 {
            return Ok(x.clone());
        }
        let keep = 1.0 - self.p;
        let scale = 1.0 / keep;
        let mask: Vec<f32> = {
            let mut rng = self.rng.lock().unwrap();
            (0..x.elem_count())
                .map(|_| {
                    if rng.random::<f32>() < keep {
                        scale
                    } else {
                        0.0
                    }
                })
                .collect()
        };
        x.mul(&Tensor::from_vec(mask, x.shape(), x.device())?.to_dtype(x.dtype())?)
    }
}

/// Apply dropout when training (`Some`), pass through at evaluation (`None`).
pub fn maybe(d: Option<&Dropout>, x: Tensor) -> Result<Tensor> {
    match d {
        Some(d) => d.apply(&x),
        None => Ok(x),
    }
}
