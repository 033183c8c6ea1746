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
    /// Batches in the file's order every epoch (rows 1..=batch the first), not the seeded
    /// shuffle: for a run that must see exactly another tool's batches (a benchmark's peers).
    pub no_shuffle: bool,
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

    /// The settings a checkpoint of this run records; `task` says what is trained on what.
    pub fn settings(&self, examples: usize, task: TaskKey) -> RunSettings {
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
            no_shuffle: self.no_shuffle,
            examples,
            loss: task.loss,
            data: task.data,
        }
    }
}

/// What a task trains and on what: its loss (objective and head) and a fingerprint of its
/// training examples' content as the model sees them (tokens and targets), so another file with
/// the same row count is still told apart.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TaskKey {
    pub loss: String,
    pub data: String,
}

/// Everything that decides which examples a step sees, its dropout masks and its learning rate,
/// compared as a whole on --resume: a setting added here is checked without another line.
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
    /// Runs before the flag were shuffled.
    #[serde(default)]
    pub no_shuffle: bool,
    pub examples: usize,
    /// The task's objective (`TaskKey::loss`); empty in checkpoints written before it was
    /// recorded, which then cannot be resumed (the loss cannot be shown to be the same).
    #[serde(default)]
    pub loss: String,
    /// The training data's content fingerprint (`TaskKey::data`).
    #[serde(default)]
    pub data: String,
}

impl RunSettings {
    /// A resumed run must ask for exactly what the checkpoint was trained with: anything else
    /// mixes two schedules, two objectives or two datasets into one model without a word. The
    /// settings are compared field by field; the first difference is named by its flag.
    pub fn check_resume(&self, saved: &RunSettings) -> Result<()> {
        let table = |s: &RunSettings| match serde_json::to_value(s) {
            Ok(serde_json::Value::Object(m)) => m,
            _ => unreachable!("RunSettings serialises to a table"),
        };
        let (was, now) = (table(saved), table(self));
        // the objective first: another loss reads other columns, so its data differs as well
        let differs = |k: &String, v: &serde_json::Value| was.get(k) != Some(v);
        let found = now
            .iter()
            .find(|(k, v)| *k == "loss" && differs(k, v))
            .or_else(|| now.iter().find(|(k, v)| differs(k, v)));
        let Some((key, v)) = found else {
            return Ok(());
        };
        let old = was.get(key).cloned().unwrap_or(serde_json::Value::Null);
        let what = match key.as_str() {
            "examples" | "data" => {
                return Err(Error::msg(format!(
                    "--resume: the training data changed ({} examples in the checkpoint's run, \
                     {} now{}); resume on the same data, or start afresh without --resume",
                    saved.examples,
                    self.examples,
                    if saved.data != self.data {
                        ", and its content differs"
                    } else {
                        ""
                    }
                )))
            }
            k => format!("--{}", k.replace('_', "-")),
        };
        let show = |v: &serde_json::Value| match v {
            serde_json::Value::String(s) if s.is_empty() => "(not recorded)".to_string(),
            serde_json::Value::String(s) => s.clone(),
            v => v.to_string(),
        };
        Err(Error::msg(format!(
            "--resume: the checkpoint was trained with {what} {}, this run asks for {}; resume \
             with the same settings, or start afresh without --resume",
            show(&old),
            show(v)
        )))
    }
}
