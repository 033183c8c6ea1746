use super::train_driver::RunCard;
use super::train_opts::TrainOpts;
use crate::data::Io;
use crate::data::{PairColumns, DEFAULT_PAIR_COLUMNS};
use crate::error::Result;
use crate::eval::{accuracy, sts, EvalOptions};
use crate::flags;
use crate::model::folders::card::CardKind;
use crate::train::cross_encoder::{CrossEncoderData, CrossEncoderTask};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Starting model: an HF BERT folder, a sentence-transformers folder or a cross-encoder
    #[arg(value_parser = crate::model::folders::home::parse_model, long = flags::MODEL)]
    model: PathBuf,
    /// Labelled pairs; repeat it to train on several files with the same columns as one set
    #[arg(long = flags::TRAIN, required = true)]
    train: Vec<PathBuf>,
    /// Dev pairs: Spearman of the scores (one label) or accuracy (classes)
    #[arg(long = flags::DEV)]
    dev: Option<PathBuf>,
    /// Output folder: the best model (HF BertForSequenceClassification), its card README.md,
    /// train_log.csv, loss.svg/png; checkpoint/ while it runs (kept with --keep-checkpoint)
    #[arg(long = flags::OUT)]
    out: PathBuf,
    /// 1: a score in [0, 1] (BCE); more: classes (cross-entropy)
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    num_labels: u64,
    /// Also train on (sentence2, sentence1) for every pair
    #[arg(long = flags::BOTH_ORDERS)]
    both_orders: bool,
    /// The pair columns and the label column, in --train and --dev (`a|b`: the first of those
    /// the file has)
    #[arg(long, default_value = DEFAULT_PAIR_COLUMNS)]
    columns: PairColumns,
    #[command(flatten)]
    pub(super) train_opts: TrainOpts,
}

pub fn run(a: Args) -> Result<()> {
    let data = CrossEncoderData {
        train: &a.train,
        columns: &a.columns,
        both_orders: a.both_orders,
    };
    let mut task = CrossEncoderTask::new(
        &a.model,
        a.num_labels as usize,
        a.train_opts.max_seq_length(),
        data,
        a.train_opts.seed(),
        &a.train_opts.device()?,
    )?;
    if let Some(d) = &a.dev {
        let eo = EvalOptions {
            columns: a.columns.clone(),
            ..Default::default()
        };
        let kind = if a.num_labels == 1 {
            sts::KIND
        } else {
            accuracy::KIND
        };
        task.dev = Some((kind.load)(d, &eo)?);
    }
    let card = RunCard::fine_tuning(
        CardKind::CrossEncoder,
        &a.model,
        a.train.iter().map(|t| t.as_path()),
        a.dev.as_deref(),
    );
    a.train_opts.run(&mut task, &a.out, 2e-5, card)
}

impl Args {
    pub fn io(&self) -> Io {
        let start = ("--model", self.model.as_path());
        (self.train_opts).fine_tuning_io(start, &self.train, &self.dev, &self.out)
    }
}
