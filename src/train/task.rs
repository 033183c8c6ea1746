//! What a training command hands the trainer: its examples' loss (and gradients), its evaluation,
//! its parameters and how to save them.
use super::config::TaskKey;
use super::grads::ParamGrads;
use crate::error::{Error, Result};
use crate::hash::mix64;
use crate::model::engine::Backend;
use crate::model::kernels::precision::Precision;
use crate::model::{Dropout, DropoutRates};
use candle_core::backprop::GradStore;
use candle_core::{DType, Tensor, Var};
use candle_nn::VarMap;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use std::path::Path;

/// A loss value and its named parts (Condenser's two MLM losses, say), each part a scalar tensor.
pub struct LossOutput {
    pub total: Tensor,
    pub parts: Vec<(&'static str, Tensor)>,
}

impl LossOutput {
    pub fn single(total: Tensor) -> LossOutput {
        LossOutput {
            total,
            parts: Vec::new(),
        }
    }
}

/// One backward pass: the (weighted) loss value, its parts and the gradients.
pub struct Gradients {
    pub value: f64,
    pub parts: Vec<(&'static str, f64)>,
    /// The trainable parameters' gradients (detached: no graph kept).
    pub grads: ParamGrads,
}

/// The dropout identity of part `part` of example `example` (a bi-encoder's column, a
/// coCondenser span): what the engine keys a sequence's masks by, so that they depend on the
/// example and never on the shard, thread or mini-batch it lands in.
pub fn dropout_key(example: usize, part: usize) -> u64 {
    (example as u64) ^ ((part as u64) << 48)
}

/// (metric name, value; higher is better): a dev evaluation's primary metric.
pub type Score = (String, f64);

fn scalar(t: &Tensor) -> candle_core::Result<f64> {
    t.to_dtype(DType::F64)?.to_scalar::<f64>()
}

/// The loss times `weight`, backpropagated in one pass; the gradients of `params` kept.
pub fn backward(out: LossOutput, weight: f64, params: &[Var]) -> Result<Gradients> {
    let (mut g, store) = backward_store(out, weight)?;
    g.grads = ParamGrads::from_store(params, store);
    Ok(g)
}

/// The loss times `weight`, backpropagated: its value and parts (no gradients kept yet), and
/// candle's whole store, for a caller that reads more than parameters from it (a leaf's gradient
/// to run the engine's backward from).
pub fn backward_store(out: LossOutput, weight: f64) -> Result<(Gradients, GradStore)> {
    let total = if weight == 1.0 {
        out.total
    } else {
        out.total.affine(weight, 0.0)?
    };
    let parts = out
        .parts
        .iter()
        .map(|(n, t)| Ok((*n, scalar(t)? * weight)))
        .collect::<Result<Vec<_>>>()?;
    let g = Gradients {
        value: scalar(&total)?,
        parts,
        grads: ParamGrads::default(),
    };
    Ok((g, total.backward()?))
}

/// The examples of an epoch in a seeded random order (the default of `TrainTask::epoch_order`).
pub fn epoch_order(n: usize, seed: u64, epoch: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    order.shuffle(&mut StdRng::seed_from_u64(mix64(
        seed ^ (epoch as u64).wrapping_mul(0x9e37_79b9),
    )));
    order
}

pub trait TrainTask: Sync {
    fn num_examples(&self) -> usize;

    /// Run the model's Linear products in `p` (model/kernels/precision.rs) from now on. Tasks whose
    /// model cannot refuse anything but f32, so the flag is never silently ignored.
    fn set_precision(&mut self, p: Precision) -> Result<()> {
        if p == Precision::F32 {
            return Ok(());
        }
        Err(Error::msg(format!(
            "--precision {}: this command trains in f32 only",
            p.name()
        )))
    }

    /// Whether the optimizer updates the variable `name` (default: every one). A frozen variable
    /// keeps its value: no step, no weight decay, no part in the gradient norm's clipping (as
    /// PyTorch leaves a parameter without a gradient).
    fn trains(&self, _name: &str) -> bool {
        true
    }

    /// CPU threads a micro-batch may be split across (`--threads`): tasks whose loss couples the
    /// batch split its forward and backward themselves, and say across how many threads (for
    /// the summary); others (None) are split by the trainer.
    fn set_threads(&mut self, _n: usize) -> Option<usize> {
        None
    }

    /// The engine this task's BERT trains on (model/engine/backend.rs): the summary says which
    /// ran, the trainer keys dropout by example only on an engine, and only the GPU engine runs
    /// below f32 on a GPU.
    fn backend(&self) -> Backend {
        Backend::Graph("this task runs candle's graph".into())
    }

    /// What the task changed of what it was asked, for the user (a length cut to the model's).
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }

    /// The examples of epoch `epoch`, in the order they are batched (consecutive `batch`-sized
    /// runs): by default a seeded shuffle.
    fn epoch_order(&self, seed: u64, epoch: usize, _batch: usize) -> Vec<usize> {
        epoch_order(self.num_examples(), seed, epoch)
    }

    /// When the loss is a mean over independent units (examples; masked tokens), the number of
    /// units the examples `idx` hold: the trainer may then split a micro-batch across CPU threads
    /// and weight each shard's loss by its share, which gives the whole batch's gradient. None
    /// (the default): the loss couples the batch (in-batch negatives) and is never split.
    fn split_weight(&self, _idx: &[usize], _seed: u64) -> Option<f64> {
        None
    }

    /// The loss over the training examples `idx`, with dropout when given. `seed` is the
    /// micro-batch's: any other randomness (masks, spans) derives from it and the example, so a
    /// resumed or split batch draws exactly the same.
    fn loss(&self, idx: &[usize], seed: u64, drop: Option<&Dropout>) -> Result<LossOutput>;

    /// The loss times `weight`, and its gradients. Tasks that must run their own backward
    /// (GradCache) override this.
    fn gradients(
        &self,
        idx: &[usize],
        seed: u64,
        drop: Option<&Dropout>,
        weight: f64,
    ) -> Result<Gradients> {
        let params = super::params::var_list(self.varmap());
        backward(self.loss(idx, seed, drop)?, weight, &params)
    }

    /// The loss and a fingerprint of the training data's content, recorded in checkpoints so
    /// that --resume refuses another objective or other data (same row count or not).
    fn key(&self) -> TaskKey;

    /// The model's dropout rates (config.json's, unless the run overrides them).
    fn dropout_rates(&self) -> DropoutRates;

    /// The primary dev metric, or None without dev data.
    fn evaluate(&self) -> Result<Option<Score>>;

    fn varmap(&self) -> &VarMap;

    /// Tensors the starting checkpoint lacked, initialised fresh (task heads), for the run to say.
    fn fresh(&self) -> &[String] {
        &[]
    }

    /// Write the model folder.
    fn save(&self, dir: &Path) -> Result<()>;

    /// Wait until the work queued so far is complete on the device (a GPU's stream; nothing on
    /// the CPU, whose work is done when its calls return): a step's clock stops after it.
    fn synchronize(&self) -> Result<()> {
        Ok(super::params::device_of(self.varmap()).synchronize()?)
    }
}
