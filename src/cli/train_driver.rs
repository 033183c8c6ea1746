//! The run-and-report step every training command shares: check the precision, say which tensors
//! start fresh, train with a progress bar, print the summary line.
use super::model_opts::matmuls;
use super::progress::{self, out};
use super::train_opts::TrainOpts;
use condenser::error::Result;
use condenser::model::Precision;
use condenser::runtime::DeviceSpec;
use condenser::train::{train, TrainTask};
use std::path::Path;

impl TrainOpts {
    /// Say which tensors start fresh, train with a progress bar, print the summary line.
    pub fn run(&self, task: &mut impl TrainTask, out_dir: &Path, default_lr: f64) -> Result<()> {
        let cfg = self.config(out_dir, default_lr)?;
        cfg.validate()?;
        if self.precision != Precision::F32 {
            if self.device != DeviceSpec::Cpu {
                return Err(condenser::error::Error::msg(format!(
                    "--precision {} applies to CPU training; on a GPU use f32 (this build's \
                     CUDA training path is f32)",
                    self.precision.name()
                )));
            }
            self.precision.check_cpu("--precision")?;
        }
        task.set_precision(self.precision)?;
        if self.device == DeviceSpec::Cpu {
            task.set_threads(cfg.threads);
        }
        for n in task.notes() {
            out(&format!("note: {n}\n"));
        }
        if !task.fresh().is_empty() {
            out(&format!(
                "initialised fresh (not in the starting checkpoint): {}\n",
                task.fresh().join(", ")
            ));
        }
        let bar = progress::bar(Some(0), "steps {msg}");
        let r = train(task, &cfg, self.resume, &bar)?;
        bar.finish_and_clear();
        if r.already_done {
            out(&format!(
                "the run in {} had already finished ({} steps); nothing to do\n",
                out_dir.display(),
                r.steps
            ));
            return Ok(());
        }
        let best = r
            .best
            .map(|(k, v)| format!(", best dev {k} {v:.4}"))
            .unwrap_or_default();
        out(&format!(
            "trained {} steps in {:.1} s ({:.1} s in training steps: {:.1} examples/s, batches split across {} thread{}; {}; {} products{}){best}\n{}\nwrote {}\n",
            r.steps,
            r.seconds,
            r.step_seconds,
            r.examples_per_s,
            r.threads,
            if r.threads == 1 { "" } else { "s" },
            matmuls(self.device),
            match self.precision {
                Precision::Bf16 => format!(
                    "bf16 on {}",
                    condenser::model::kernels::precision::bf16_backend()
                ),
                p => p.name().to_string(),
            },
            if r.skipped_steps > 0 {
                format!(", {} f16 steps skipped for overflow", r.skipped_steps)
            } else {
                String::new()
            },
            engine_note(task.engine_declines()),
            out_dir.display()
        ));
        Ok(())
    }
}

/// Which path trained (the task's word, not the environment's), the CPU class its kernels ran
/// at, and the peak memory, for the summary.
fn engine_note(declined: Option<String>) -> String {
    let path = match declined {
        None => format!(
            "condenser's engine, {} kernels",
            condenser::model::kernels::isa::describe()
        ),
        Some(why) => format!("candle's graph ({why})"),
    };
    match condenser::runtime::peak_rss_mb() {
        Some(mb) => format!("trained with {path}; peak memory {mb:.0} MB"),
        None => format!("trained with {path}"),
    }
}
