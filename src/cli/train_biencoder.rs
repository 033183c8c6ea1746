use super::train_opts::TrainOpts;
use crate::data::PairColumns;
use crate::error::Result;
use crate::model::Pooling;
use crate::train::biencoder::{BiEncoderTask, BiLoss};
use crate::train::dev::DevSet;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Starting model: an HF BERT folder, a sentence-transformers folder or a Condenser checkpoint
    #[arg(long)]
    init: PathBuf,
    #[arg(long)]
    train: PathBuf,
    /// Output folder: a sentence-transformers model, train_log.csv, loss.svg/png, checkpoint/
    #[arg(long)]
    out: PathBuf,
    /// cosine, mse, softmax, mnr, contrastive or triplet
    #[arg(long)]
    loss: String,
    /// Training columns; default per loss: cosine/softmax sentence1,sentence2,label; mse
    /// sentence,embedding; mnr/contrastive anchor,positive,negative? ('?': used when present);
    /// triplet anchor,positive,negative
    #[arg(long)]
    columns: Option<String>,
    /// mean or cls (default: the starting folder's pooling; mean for a plain BERT folder)
    #[arg(long)]
    pooling: Option<String>,
    /// Classes of the softmax loss
    #[arg(long, default_value_t = 3)]
    num_labels: usize,
    /// Dev data: pairs (STS scores -> Spearman, 0/1 -> average precision, classes with the softmax
    /// loss -> accuracy) or a retrieval folder (queries, corpus, qrels -> nDCG@10)
    #[arg(long)]
    dev: Option<PathBuf>,
    #[arg(long, default_value = "sentence1,sentence2,label")]
    dev_columns: String,
    #[arg(long, default_value_t = 128)]
    max_seq_length: usize,
    #[command(flatten)]
    train_opts: TrainOpts,
}

pub fn run(a: Args) -> Result<()> {
    let loss = BiLoss::parse(&a.loss, a.num_labels)?;
    let pooling = a.pooling.as_deref().map(Pooling::parse).transpose()?;
    let mut task = BiEncoderTask::new(
        &a.init,
        loss,
        pooling,
        a.max_seq_length,
        a.train_opts.seed(),
        &a.train_opts.device()?,
    )?;
    let columns = a.columns.as_deref().unwrap_or(loss.default_columns());
    task.data = task.read_data(&a.train, columns)?;
    if let Some(d) = &a.dev {
        let classes = matches!(loss, BiLoss::Softmax { .. });
        task.dev = Some(DevSet::detect(
            d,
            &PairColumns::parse(&a.dev_columns)?,
            classes,
        )?);
    }
    a.train_opts.run(&task, &a.out)
}
