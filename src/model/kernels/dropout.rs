//! Dropout with masks from a seeded RNG: candle's own draws from an RNG that cannot be seeded,
//! and a training run must be reproducible bit for bit on CPU (and resumable: the trainer
//! re-seeds from (seed, step), so no RNG state needs saving). The generator is xoshiro
//! (rand's SmallRng): masks need no cryptographic strength, and a Condenser step draws ~50M.
//!
//! On a GPU the masks are drawn there (kernels/cuda_uniform.rs, a Philox generator), not on the
//! host: host masks cost a batch-64 MNR step on an H200 ~150 of its ~210 ms (drawn and copied,
//! B x heads x L^2 values a layer). Each mask's seed comes from (stream seed, draw number), so a
//! run, a resumed run and a GradCache replay draw the same masks.
use crate::hash::mix64;
use candle_core::{Result, Tensor};
use rand::rngs::SmallRng;
use rand::{RngCore, SeedableRng};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// BERT's two dropout rates: on hidden states (embeddings, sublayer outputs, the classifier's
/// input) and on attention probabilities; config.json's hidden_dropout_prob and
/// attention_probs_dropout_prob unless the run overrides them.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DropoutRates {
    pub hidden: f32,
    pub attention: f32,
}

impl DropoutRates {
    /// One rate for both (a `--dropout` override).
    pub fn uniform(p: f32) -> DropoutRates {
        DropoutRates {
            hidden: p,
            attention: p,
        }
    }
}

pub struct Dropout {
    pub rates: DropoutRates,
    seed: u64,
    rng: Mutex<SmallRng>,
    /// Masks drawn on a GPU so far: the next one's seed.
    device_draws: AtomicU64,
}

impl Dropout {
    pub fn new(rates: DropoutRates, seed: u64) -> Dropout {
        Dropout {
            rates,
            seed,
            rng: Mutex::new(SmallRng::seed_from_u64(seed)),
            device_draws: AtomicU64::new(0),
        }
    }

    /// An independent stream for part `i` of the work (a shard, a GradCache chunk): the same `i`
    /// always draws the same masks, so a forward pass can be replayed exactly.
    pub fn fork(&self, i: u64) -> Dropout {
        Dropout::new(self.rates, mix64(self.seed ^ mix64(i.wrapping_add(1))))
    }

    /// The same masks again: a new stream from this one's seed (the engine's masks, keyed by
    /// example, are the same in every copy).
    pub fn same(&self) -> Dropout {
        Dropout::new(self.rates, self.seed)
    }

    /// The stream's seed: kernels that draw their masks by hashing (seed, position) instead of
    /// from the stateful RNG (model/engine) start from it.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Dropout on hidden states.
    pub fn hidden(&self, x: &Tensor) -> Result<Tensor> {
        self.apply(x, self.rates.hidden)
    }

    /// Dropout on attention probabilities.
    pub fn attention(&self, x: &Tensor) -> Result<Tensor> {
        self.apply(x, self.rates.attention)
    }

    /// A dropout mask of `n` values for attention probabilities (0 or 1/(1 - p)), for ops that
    /// apply it themselves; None when the rate is 0.
    pub fn attention_mask(&self, n: usize) -> Option<Vec<f32>> {
        self.mask(n, self.rates.attention)
    }

    fn mask(&self, n: usize, p: f32) -> Option<Vec<f32>> {
        if p <= 0.0 {
            return None;
        }
        let keep = 1.0 - p;
        let scale = 1.0 / keep;
        // keep when a uniform 32-bit draw falls below keep * 2^32
        let below = (keep as f64 * 4_294_967_296.0).min(u32::MAX as f64) as u32;
        let mut rng = self.rng.lock().unwrap();
        Some(
            (0..n)
                .map(|_| if rng.next_u32() < below { scale } else { 0.0 })
                .collect(),
        )
    }

    /// x * mask / (1 - p), mask ~ Bernoulli(1 - p).
    fn apply(&self, x: &Tensor, p: f32) -> Result<Tensor> {
        if p > 0.0 && !x.device().is_cpu() {
            let keep = self.device_uniform(x)?.ge(p as f64)?.to_dtype(x.dtype())?;
            return (x * keep)?.affine(1.0 / (1.0 - p as f64), 0.0);
        }
        match self.mask(x.elem_count(), p) {
            None => Ok(x.clone()),
            Some(mask) => {
                x.mul(&Tensor::from_vec(mask, x.shape(), x.device())?.to_dtype(x.dtype())?)
            }
        }
    }

    /// Uniform values in (0, 1] of x's shape on x's GPU, seeded from this stream's seed and its
    /// draw count.
    fn device_uniform(&self, x: &Tensor) -> Result<Tensor> {
        let n = self.device_draws.fetch_add(1, Ordering::Relaxed);
        let seed = mix64(self.seed ^ mix64(n.wrapping_add(0x6d61736b)));
        #[cfg(feature = "cuda")]
        if let candle_core::Device::Cuda(d) = x.device() {
            return super::cuda_uniform::uniform(d, x.shape(), seed);
        }
        candle_core::bail!(
            "dropout on {:?} (mask seed {seed:#x}): seeded masks are drawn on the CPU or a CUDA \
             GPU only",
            x.device().location()
        )
    }
}

/// Dropout on hidden states when training (`Some`), pass through at evaluation (`None`).
pub fn maybe(d: Option<&Dropout>, x: Tensor) -> Result<Tensor> {
    match d {
        Some(d) => d.hidden(&x),
        None => Ok(x),
    }
}

/// Dropout on attention probabilities when training.
pub fn maybe_attention(d: Option<&Dropout>, x: Tensor) -> Result<Tensor> {
    match d {
        Some(d) => d.attention(&x),
        None => Ok(x),
    }
}
