//! The run-and-report step every training command shares: check the precision, say which tensors
//! start fresh, train with a progress bar, print the summary line.
use super::model_opts::matmuls;
use super::progress::{self, out};
use super::train_opts::TrainOpts;
use crate::error::{Error, Result};
use crate::model::folders::card::{self, Card, CardKind, DataFile};
use crate::model::Precision;
use crate::runtime::DeviceSpec;
use crate::train::{train, TrainConfig, TrainReport, TrainTask};
use std::path::Path;

/// What a training command tells its model card: the kind of folder, the starting model and the
/// data files it read, by role.
pub struct RunCard<'a> {
    pub kind: CardKind,
    pub base: &'a Path,
    pub data: Vec<(&'static str, &'a Path)>,
}

impl<'a> RunCard<'a> {
    /// A fine-tuning run's card: its train files and its dev data, if any.
    pub fn fine_tuning(
        kind: CardKind,
        base: &'a Path,
        train: impl IntoIterator<Item = &'a Path>,
        dev: Option<&'a Path>,
    ) -> RunCard<'a> {
        let mut data: Vec<_> = train.into_iter().map(|t| ("train", t)).collect();
        data.extend(dev.map(|d| ("dev", d)));
        RunCard { kind, base, data }
    }
}

impl TrainOpts {
    /// Say which tensors start fresh, train with a progress bar, write the model card, remove the
    /// finished run's checkpoint (unless --keep-checkpoint), print the summary line.
    pub fn run(
        &self,
        task: &mut impl TrainTask,
        out_dir: &Path,
        default_lr: f64,
        card: RunCard,
    ) -> Result<()> {
        let cfg = self.config(out_dir, default_lr)?;
        cfg.validate()?;
        let ckpt = out_dir.join("checkpoint");
        if self.resume && !ckpt.exists() && card::finished_run(out_dir) {
            // a finished run's checkpoint is removed, so there is nothing to continue or to check
            // these settings against: said, not guessed
            out(&format!(
                "the run in {} had already finished (its checkpoint was removed when it did; \
                 --keep-checkpoint keeps one); nothing to do, and this call's settings were not \
                 compared with that run's (its README.md lists them)\n",
                out_dir.display()
            ));
            return Ok(());
        }
        if self.precision != Precision::F32 {
            if self.device != DeviceSpec::Cpu {
                if !task.backend().device_precision(self.precision) {
                    return Err(crate::error::Error::msg(format!(
                        "--precision {} on a GPU: only a bi-encoder or cross-encoder training \
                         through the GPU engine (a cuda build's default on a card, unless \
                         CONDENSER_GPU_ENGINE=off; bf16) runs below f32 there, and this run \
                         trains through candle's graph, in f32; use f32",
                        self.precision.name()
                    )));
                }
            } else {
                self.precision.check_cpu("--precision")?;
            }
        }
        task.set_precision(self.precision)?;
        // a task that splits its batches itself says across how many threads (the trainer's
        // report counts only its own split)
        let own_split = match self.device {
            DeviceSpec::Cpu => task.set_threads(cfg.threads),
            _ => None,
        };
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
        let mut r = train(task, &cfg, self.resume, &bar)?;
        r.threads = own_split.unwrap_or(r.threads);
        bar.finish_and_clear();
        if r.already_done {
            out(&format!(
                "the run in {} had already finished ({} steps); nothing to do\n",
                out_dir.display(),
                r.steps
            ));
            return Ok(());
        }
        self.write_card(task, &cfg, &r, out_dir, card)?;
        super::summary::record(
            "training",
            serde_json::json!({
                "steps": r.steps,
                "seconds": r.seconds,
                "step_seconds": r.step_seconds,
                "eval_seconds": r.eval_seconds,
                "save_seconds": r.save_seconds,
                "examples_per_s": r.examples_per_s,
                "best": r.best.as_ref().map(|(k, v)| serde_json::json!({"metric": k, "value": v})),
                "threads": r.threads,
            }),
        );
        super::summary::record("model", out_dir.display().to_string());
        let kept = match self.keep_checkpoint {
            true => "checkpoint/ kept (--keep-checkpoint)".to_string(),
            false => {
                std::fs::remove_dir_all(&ckpt).or_else(|e| match ckpt.exists() {
                    true => Err(Error::file(&ckpt, e)),
                    false => Ok(()),
                })?;
                "checkpoint/ removed (--keep-checkpoint keeps it)".to_string()
            }
        };
        let best = r
            .best
            .map(|(k, v)| format!(", best dev {k} {v:.4}"))
            .unwrap_or_default();
        out(&format!(
            "trained {} steps in {:.2} s ({:.2} s in training steps, each until its update was complete on the device: {:.1} examples/s; {:.2} s evaluating, {:.2} s saving; batches split across {} thread{}; {}; {} products{}){best}\n{}\nwrote {} (model card README.md; {kept})\n",
            r.steps,
            r.seconds,
            r.step_seconds,
            r.examples_per_s,
            r.eval_seconds,
            r.save_seconds,
            r.threads,
            if r.threads == 1 { "" } else { "s" },
            matmuls(self.device),
            match self.precision {
                // off the CPU, bf16 runs only on the GPU engine (refused above otherwise)
                Precision::Bf16 if self.device != DeviceSpec::Cpu => {
                    "bf16 on cuBLAS's bf16 GEMM (the GPU engine)".to_string()
                }
                Precision::Bf16 => format!(
                    "bf16 on {}",
                    crate::model::kernels::precision::bf16_backend()
                ),
                p => p.name().to_string(),
            },
            if r.skipped_steps > 0 {
                format!(", {} f16 steps skipped for overflow", r.skipped_steps)
            } else {
                String::new()
            },
            engine_note(&task.backend()),
            out_dir.display()
        ));
        Ok(())
    }
}

impl TrainOpts {
    /// The folder's README.md: what made it, as sentence-transformers writes a card on save.
    fn write_card(
        &self,
        task: &impl TrainTask,
        cfg: &TrainConfig,
        r: &TrainReport,
        out_dir: &Path,
        card: RunCard,
    ) -> Result<()> {
        let mut data = Vec::new();
        for (role, path) in &card.data {
            data.extend(DataFile::describe(role, path)?);
        }
        let mut hyper = vec![
            ("epochs", cfg.epochs.to_string()),
            ("batch size", cfg.batch_size.to_string()),
            ("learning rate (peak)", cfg.lr.to_string()),
            ("warm-up (fraction of steps)", cfg.warmup.to_string()),
            ("weight decay", cfg.weight_decay.to_string()),
            (
                "gradient clipping (max norm)",
                cfg.max_grad_norm.to_string(),
            ),
            ("gradient accumulation", cfg.grad_accum.to_string()),
            (
                "max sequence length (training)",
                self.max_seq_length().to_string(),
            ),
            ("seed", cfg.seed.to_string()),
            ("precision", self.precision.name().to_string()),
            ("optimizer steps", r.steps.to_string()),
        ];
        hyper.push((
            "dropout",
            cfg.dropout
                .map_or("config.json's".to_string(), |d| d.to_string()),
        ));
        if let Some(m) = cfg.max_steps {
            hyper.push(("max steps", m.to_string()));
        }
        let hardware = match self.device {
            DeviceSpec::Cpu => format!(
                "CPU: {} ({} threads)",
                crate::runtime::cpu_model(),
                r.threads
            ),
            gpu => format!("GPU {gpu} (host CPU: {})", crate::runtime::cpu_model()),
        };
        Card {
            kind: card.kind,
            base_model: crate::model::folders::home::display_name(card.base),
            command: super::command_line::get(),
            data,
            loss: task.key().loss,
            hyperparameters: hyper.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
            evaluation: r
                .best
                .iter()
                .map(|(k, v)| (format!("dev {k} (the saved model's)"), format!("{v:.4}")))
                .collect(),
            hardware,
            wall_seconds: r.seconds,
            notes: Vec::new(),
        }
        .write(out_dir)
    }
}

/// Which path trained (the task's word, not the environment's), the CPU class its kernels ran
/// at, and the peak memory, for the summary.
fn engine_note(backend: &crate::model::engine::Backend) -> String {
    let path = match backend.declines() {
        None => format!("condenser's engine, {} kernels", backend.kernels()),
        Some(why) => format!("candle's graph ({why})"),
    };
    match crate::runtime::peak_rss_mb() {
        Some(mb) => format!("trained with {path}; peak memory {mb:.0} MB"),
        None => format!("trained with {path}"),
    }
}
