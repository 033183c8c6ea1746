use super::{out, progress};
use crate::data::PairColumns;
use crate::error::{Error, Result};
use crate::train::cross_encoder::{CrossEncoderData, CrossEncoderTask};
use crate::train::{train, TrainConfig};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Starting model: an HF BERT folder, a sentence-transformers folder or a cross-encoder
    #[arg(long)]
    model: PathBuf,
    #[arg(long)]
    train: PathBuf,
    #[arg(long)]
    dev: Option<PathBuf>,
    /// Output folder: the best model (HF BertForSequenceClassification), train_log.csv, loss.svg/png, checkpoint/
    #[arg(long)]
    out: PathBuf,
    /// 1: a score in [0, 1] (BCE); more: classes (cross-entropy)
    #[arg(long, default_value_t = 1)]
    num_labels: usize,
    #[arg(long, default_value_t = 1)]
    epochs: usize,
    #[arg(long, default_value_t = 16)]
    batch_size: usize,
    #[arg(long, default_value_t = 2e-5)]
    lr: f64,
    /// Warm-up as a fraction of the optimizer steps
    #[arg(long, default_value_t = 0.1)]
    warmup: f64,
    #[arg(long, default_value_t = 128)]
    max_seq_length: usize,
    /// Also train on (sentence2, sentence1) for every pair
    #[arg(long)]
    both_orders: bool,
    #[arg(long, default_value = "sentence1,sentence2,label")]
    columns: String,
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
}

pub fn run(a: Args) -> Result<()> {
    let cols = PairColumns::parse(&a.columns)?;
    if a.num_labels == 0 {
        return Err(Error::msg("--num-labels must be at least 1"));
    }
    let data = CrossEncoderData {
        train: &a.train,
        dev: a.dev.as_deref(),
        columns: &cols,
        both_orders: a.both_orders,
    };
    let task = CrossEncoderTask::new(&a.model, a.num_labels, a.max_seq_length, data, a.seed)?;
    let cfg = TrainConfig {
        epochs: a.epochs,
        batch_size: a.batch_size,
        lr: a.lr,
        warmup: a.warmup,
        weight_decay: a.weight_decay,
        max_grad_norm: 1.0,
        grad_accum: a.grad_accum,
        seed: a.seed,
        dropout: a.dropout,
        eval_steps: a.eval_steps,
        checkpoint_steps: a.checkpoint_steps,
        max_steps: a.max_steps,
        out: a.out.clone(),
    };
    let bar = progress::bar(Some(0), "steps {msg}");
    let r = train(&task, &cfg, a.resume, &bar)?;
    bar.finish_and_clear();
    let best = r
        .best
        .map(|(k, v)| format!(", best dev {k} {v:.4}"))
        .unwrap_or_default();
    out(&format!(
        "trained {} steps in {:.1} s ({:.1} s in training steps: {:.1} examples/s){best}\nwrote {}\n",
        r.steps,
        r.seconds,
        r.step_seconds,
        r.examples_per_s,
        a.out.display()
    ));
    Ok(())
}
