//! A training run's settings: checked once before anything runs, and recorded in every checkpoint
//! so that `--resume` continues exactly the run that was killed, or refuses naming the flag.
use crate::error::{Error, Result};
use crate::model::kernels::precision::Precision;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

#[derive(Clone, Debug)]
pub struct TrainConfig {
    pub epochs: usize,
    pub batch_size: usize,
    pub lr: f64,
    /// Fraction of optimizer steps spent warming up.
    pub warmup: f64,
    pub weight_decay: f64,
    pub max_grad_norm: f64,
    pub grad_accum: usize,
    pub seed: u64,
    /// One dropout rate for hidden states and attention, overriding the model's config.json.
    pub dropout: Option<f32>,
    /// Evaluate every this many optimizer steps (and always at the end).
    pub eval_steps: Option<u64>,
    pub checkpoint_steps: u64,
    /// Stop after this many optimizer steps (a time budget); the schedule spans them.
    pub max_steps: Option<u64>,
    /// Threads that split each micro-batch on CPU (tasks whose loss is a mean over units).
    pub threads: usize,
    /// The Linears' products in training (forward and backward); masters and AdamW stay f32.
    pub precision: Precision,
    pub out: PathBuf,
}

impl TrainConfig {
    /// Refuse settings that cannot run (a zero that would divide, a rate outside its range)
    /// with the flag's name, before any work.
    pub fn validate(&self) -> Result<()> {
        let positive: [(&str, u64); 4] = [
            ("--epochs", self.epochs as u64),
            ("--batch-size", self.batch_size as u64),
            ("--grad-accum", self.grad_accum as u64),
            ("--checkpoint-steps", self.checkpoint_steps),
        ];
        let optional = [
            ("--eval-steps", self.eval_steps),
            ("--max-steps", self.max_steps),
        ];
        for (flag, v) in positive
            .into_iter()
            .chain(optional.into_iter().filter_map(|(f, v)| v.map(|v| (f, v))))
        {
            if v == 0 {
                return Err(Error::msg(format!("{flag} must be at least 1")));
            }
        }
        if self.threads == 0 {
            return Err(Error::msg("--threads must be at least 1"));
        }
        if !(self.lr.is_finite() && self.lr > 0.0) {
            return Err(Error::msg(format!("--lr {}: must be positive", self.lr)));
        }
        if !(0.0..=1.0).contains(&self.warmup) {
            return Err(Error::msg(format!(
                "--warmup {}: a fraction of the steps, in [0, 1]",
                self.warmup
            )));
        }
        if self.dropout.is_some_and(|p| !(0.0..1.0).contains(&p)) {
            return Err(Error::msg("--dropout: a probability in [0, 1)"));
        }
        if !(self.weight_decay.is_finite() && self.weight_decay >= 0.0) {
            return Err(Error::msg("--weight-decay must be 0 or more"));
        }
        Ok(())
    }

    /// The settings a checkpoint of this run records.
    pub fn settings(&self, examples: usize, data: &str) -> RunSettings {
        RunSettings {
            epochs: self.epochs,
            batch_size: self.batch_size,
            grad_accum: self.grad_accum,
            seed: self.seed,
            max_steps: self.max_steps,
            lr: self.lr,
            warmup: self.warmup,
            weight_decay: self.weight_decay,
            dropout: self.dropout,
            threads: self.threads,
            precision: self.precision,
            examples,
            data: data.to_string(),
        }
    }
}

/// Everything that decides which examples a step sees, its dropout masks and its learning rate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunSettings {
    pub epochs: usize,
    pub batch_size: usize,
    pub grad_accum: usize,
    pub seed: u64,
    pub max_steps: Option<u64>,
    pub lr: f64,
    pub warmup: f64,
    pub weight_decay: f64,
    pub dropout: Option<f32>,
    pub threads: usize,
    /// Runs before precisions were recorded were f32.
    #[serde(default)]
    pub precision: Precision,
    pub examples: usize,
    /// What the training data is (a task's key: its corpus blocks, say); empty when only the
    /// example count identifies it.
    #[serde(default)]
    pub data: String,
}

impl RunSettings {
    /// A resumed run must ask for exactly what the checkpoint was trained with: anything else
    /// mixes two schedules (or two datasets) into one model without a word.
    pub fn check_resume(&self, saved: &RunSettings) -> Result<()> {
        let show = |v: &dyn std::fmt::Debug| format!("{v:?}");
        let diffs: [(&str, String, String); 11] = [
            ("--epochs", show(&saved.epochs), show(&self.epochs)),
            (
                "--batch-size",
                show(&saved.batch_size),
                show(&self.batch_size),
            ),
            (
                "--grad-accum",
                show(&saved.grad_accum),
                show(&self.grad_accum),
            ),
            ("--seed", show(&saved.seed), show(&self.seed)),
            ("--max-steps", show(&saved.max_steps), show(&self.max_steps)),
            ("--lr", show(&saved.lr), show(&self.lr)),
            ("--warmup", show(&saved.warmup), show(&self.warmup)),
            (
                "--weight-decay",
                show(&saved.weight_decay),
                show(&self.weight_decay),
            ),
            ("--dropout", show(&saved.dropout), show(&self.dropout)),
            ("--threads", show(&saved.threads), show(&self.threads)),
            (
                "--precision",
                saved.precision.name().into(),
                self.precision.name().into(),
            ),
        ];
        if let Some((flag, was, now)) = diffs.into_iter().find(|(_, a, b)| a != b) {
            return Err(Error::msg(format!(
                "--resume: the checkpoint was trained with {flag} {was}, this run asks for {now}; \
                 resume with the same settings, or start afresh without --resume"
            )));
        }
        if saved.examples != self.examples || saved.data != self.data {
            return Err(Error::msg(format!(
                "--resume: the training data changed ({} examples in the checkpoint's run, {} now{}); \
                 resume on the same data, or start afresh without --resume",
                saved.examples,
                self.examples,
                if saved.data != self.data {
                    ", and a different corpus"
                } else {
                    ""
                }
            )));
        }
        Ok(())
    }
}
