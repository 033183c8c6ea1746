//! Flags and the run-and-report step every training command shares.
use super::{out, progress};
use crate::error::Result;
use crate::train::{train, TrainConfig, TrainTask};
use std::path::Path;

#[derive(clap::Args, Clone, Debug)]
pub struct TrainOpts {
    #[arg(long, default_value_t = 1)]
    epochs: usize,
    #[arg(long, default_value_t = 16)]
    batch_size: usize,
    /// Peak learning rate [default: 2e-5; pretrain: 1e-4]
    #[arg(long)]
    lr: Option<f64>,
    /// Warm-up as a fraction of the optimizer steps
    #[arg(long, default_value_t = 0.1)]
    warmup: f64,
    #[arg(long, default_value_t = 42)]
    seed: u64,
    #[arg(long, default_value_t = 1)]
    grad_accum: usize,
    #[arg(long, default_value_t = 0.01)]
    weight_decay: f64,
    #[arg(long, default_value_t = 0.1)]
    dropout: f32,
    /// Evaluate on --dev every N optimizer steps (always at the end)
    #[arg(long)]
    eval_steps: Option<u64>,
    #[arg(long, default_value_t = 100)]
    checkpoint_steps: u64,
    /// Stop after N optimizer steps (the schedule spans them)
    #[arg(long)]
    max_steps: Option<u64>,
    /// Continue the killed run in --out from its last checkpoint
    #[arg(long)]
    resume: bool,
    /// cpu, cuda or cuda:N (CUDA needs a build with the `cuda` feature)
    #[arg(long, default_value = "cpu")]
    device: String,
    /// CPU threads that split each batch, for losses that are a mean over examples (a run is
    /// reproducible bit for bit for a given count) [default: RAYON_NUM_THREADS, else the cores]
    #[arg(long)]
    threads: Option<usize>,
}

impl TrainOpts {
    pub fn seed(&self) -> u64 {
        self.seed
    }

    pub fn device(&self) -> Result<candle_core::Device> {
        crate::runtime::device(&self.device)
    }

    pub fn config(&self, out: &Path, default_lr: f64) -> TrainConfig {
        TrainConfig {
            epochs: self.epochs,
            batch_size: self.batch_size,
            lr: self.lr.unwrap_or(default_lr),
            warmup: self.warmup,
            weight_decay: self.weight_decay,
            max_grad_norm: 1.0,
            grad_accum: self.grad_accum,
            seed: self.seed,
            dropout: self.dropout,
            eval_steps: self.eval_steps,
            checkpoint_steps: self.checkpoint_steps,
            max_steps: self.max_steps,
            threads: self
                .threads
                .unwrap_or_else(candle_core::utils::get_num_threads),
            out: out.to_path_buf(),
        }
    }

    /// Train with a progress bar and print the summary line.
    pub fn run(&self, task: &impl TrainTask, out_dir: &Path) -> Result<()> {
        self.run_with_lr(task, out_dir, 2e-5)
    }

    pub fn run_with_lr(
        &self,
        task: &impl TrainTask,
        out_dir: &Path,
        default_lr: f64,
    ) -> Result<()> {
        let bar = progress::bar(Some(0), "steps {msg}");
        let r = train(task, &self.config(out_dir, default_lr), self.resume, &bar)?;
        bar.finish_and_clear();
        let cpu = if self.device().is_ok_and(|d| d.is_cpu()) {
            format!("; CPU matmuls: {}", crate::model::blas::describe())
        } else {
            String::new()
        };
        let best = r
            .best
            .map(|(k, v)| format!(", best dev {k} {v:.4}"))
            .unwrap_or_default();
        out(&format!(
            "trained {} steps in {:.1} s ({:.1} s in training steps: {:.1} examples/s{cpu}){best}\nwrote {}\n",
            r.steps,
            r.seconds,
            r.step_seconds,
            r.examples_per_s,
            out_dir.display()
        ));
        Ok(())
    }
}
