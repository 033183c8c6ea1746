use super::biencoder_fit;
use super::train_opts::TrainOpts;
use crate::data::Io;
use crate::data::{ColumnSpec, PairColumns, DEFAULT_PAIR_COLUMNS};
use crate::error::Result;
use crate::eval::{dev_evaluator, EvalOptions};
use crate::flags;
use crate::model::PoolingMode;
use crate::train::biencoder::{BiData, BiEncoderTask};
use crate::train::losses::{self, LossSpec, Target};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Starting model: an HF BERT folder, a sentence-transformers folder or a Condenser checkpoint
    #[arg(value_parser = crate::model::folders::home::parse_model, long = flags::INIT)]
    init: PathBuf,
    /// Training data (.parquet, .arrow, .csv, .tsv, .jsonl): the columns --columns names
    #[arg(long = flags::TRAIN)]
    train: PathBuf,
    /// Output folder: a sentence-transformers model, its card README.md, train_log.csv,
    /// loss.svg/png; checkpoint/ while it runs (kept with --keep-checkpoint)
    #[arg(long = flags::OUT)]
    out: PathBuf,
    /// The loss, as sentence-transformers defines it
    #[arg(long = flags::LOSS, value_enum)]
    loss: LossSpec,
    /// Training columns, texts then the target ('?': used when the file has it; `a|b`: the first
    /// of those names the file has) [default: the loss's]
    #[arg(long)]
    columns: Option<ColumnSpec>,
    /// Pooling to train with [default: the starting folder's; mean for a plain BERT folder]
    #[arg(long, value_enum)]
    pooling: Option<PoolingMode>,
    /// Classes of the softmax loss
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(2..))]
    num_labels: u64,
    /// Dev data: pairs (STS scores -> Spearman, 0/1 -> average precision, classes with the softmax
    /// loss -> accuracy) or a retrieval folder (queries, corpus, qrels -> nDCG@10)
    #[arg(long = flags::DEV)]
    dev: Option<PathBuf>,
    /// The --dev file's pair and label columns (a retrieval folder needs none; `a|b`: the first
    /// of those the file has)
    #[arg(long, default_value = DEFAULT_PAIR_COLUMNS)]
    dev_columns: PairColumns,
    /// Cached losses (cached-mnr): rows embedded at once; memory is bounded by this, not by
    /// --batch-size [default: 32]
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    mini_batch_size: Option<u64>,
    #[command(flatten)]
    pub(super) train_opts: TrainOpts,
}

pub fn run(a: Args) -> Result<()> {
    let spec = losses::find(a.loss.name).expect("a registry loss");
    let opts = biencoder_fit::options(
        &a.train_opts,
        a.pooling,
        a.num_labels as usize,
        a.mini_batch_size.map(|m| m as usize),
    )?;
    let mut task = BiEncoderTask::new(&a.init, spec, &opts)?;
    task.data = BiData::read(
        &a.train,
        spec,
        a.columns.as_ref(),
        &task.enc,
        opts.num_labels,
    )?;
    if let Some(d) = &a.dev {
        let eo = EvalOptions {
            columns: a.dev_columns.clone(),
            ..Default::default()
        };
        task.dev = Some(dev_evaluator(d, &eo, spec.target == Target::Class)?);
    }
    biencoder_fit::fit(
        &mut task,
        spec,
        &a.init,
        &a.train,
        a.dev.as_deref(),
        &a.out,
        &a.train_opts,
    )
}

impl Args {
    pub fn io(&self) -> Io {
        let start = ("--init", self.init.as_path());
        (self.train_opts).fine_tuning_io(
            start,
            std::slice::from_ref(&self.train),
            &self.dev,
            &self.out,
        )
    }
}
