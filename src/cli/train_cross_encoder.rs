use super::train_opts::TrainOpts;
use crate::data::PairColumns;
use crate::error::{Error, Result};
use crate::train::cross_encoder::{CrossEncoderData, CrossEncoderTask};
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
    #[arg(long, default_value_t = 128)]
    max_seq_length: usize,
    /// Also train on (sentence2, sentence1) for every pair
    #[arg(long)]
    both_orders: bool,
    #[arg(long, default_value = "sentence1,sentence2,label")]
    columns: String,
    #[command(flatten)]
    train_opts: TrainOpts,
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
    let task = CrossEncoderTask::new(
        &a.model,
        a.num_labels,
        a.max_seq_length,
        data,
        a.train_opts.seed(),
        &a.train_opts.device()?,
    )?;
    a.train_opts.run(&task, &a.out)
}
