//! Dropout with masks from a seeded RNG: candle's own draws from an RNG that cannot be seeded,
//! and a training run must be reproducible bit for bit on CPU (and resumable: the trainer
//! re-seeds from (seed, step), so no RNG state needs saving). The generator is xoshiro
//! (rand's SmallRng): masks need no cryptographic strength, and a Condenser step draws ~50M.
//!
//! On a GPU the masks are drawn there (cuRAND through candle), not on the host: host masks cost
//! a batch-64 MNR step on an H200 ~150 of its ~210 ms (drawn and copied, B x heads x L^2 values a
//! layer). They stay reproducible: the device's generator is re-seeded from (stream seed, draw
//! number) whenever another stream drew last, so a stream's masks depend only on its seed and the
//! order of its own draws (a resumed run, a GradCache replay draw the same ones).
use crate::hash::mix64;
use candle_core::{DeviceLocation, Result, Tensor};
use rand::rngs::SmallRng;
use rand::{RngCore, SeedableRng};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Which stream drew last from each device's generator, and how many draws it had made then.
static DEVICE_STREAM: Mutex<Vec<(DeviceLocation, u64, u64)>> = Mutex::new(Vec::new());
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

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
    /// This stream's identity and its draws so far from a device's generator.
    id: u64,
    device_draws: AtomicU64,
}

impl Dropout {
    pub fn new(rates: DropoutRates, seed: u64) -> Dropout {
        Dropout {
            rates,
            seed,
            rng: Mutex::new(SmallRng::seed_from_u64(seed)),
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
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

    /// Uniform values of x's shape from x's device's generator (cuRAND's, in (0, 1]),
    /// continuing this stream.
    fn device_uniform(&self, x: &Tensor) -> Result<Tensor> {
        let dev = x.device();
        let at = dev.location();
        let mut last = DEVICE_STREAM.lock().unwrap();
        let n = self.device_draws.fetch_add(1, Ordering::Relaxed);
        let slot = last.iter().position(|e| e.0 == at);
        if slot.is_none_or(|i| (last[i].1, last[i].2) != (self.id, n)) {
            dev.set_seed(mix64(self.seed ^ mix64(n.wrapping_add(0x6d61736b))))?;
        }
        match slot {
            Some(i) => last[i] = (at, self.id, n + 1),
            None => last.push((at, self.id, n + 1)),
        }
        Tensor::rand(0f32, 1f32, x.shape(), dev)
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
