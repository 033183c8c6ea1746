use super::biencoder_fit;
use super::progress::out;
use super::train_opts::TrainOpts;
use crate::data::Io;
use crate::data::{entailments, read_nli, PairColumns, DEFAULT_PAIR_COLUMNS};
use crate::error::Result;
use crate::eval::{accuracy, dev_evaluator, EvalOptions};
use crate::model::PoolingMode;
use crate::train::biencoder::{BiData, BiEncoderTask};
use crate::train::losses;
use std::path::PathBuf;

/// The NLI recipes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum NliLoss {
    /// SBERT's: a softmax classifier over (u, v, |u - v|) on the three classes
    Softmax,
    /// Multiple negatives ranking on the entailment pairs
    Mnr,
}

#[derive(clap::Args)]
pub struct Args {
    /// Starting model (HF BERT, sentence-transformers folder or Condenser checkpoint)
    #[arg(value_parser = crate::model::folders::home::parse_model, long)]
    init: PathBuf,
    /// NLI pairs: sentence1, sentence2, label (0/1/2 or entailment/neutral/contradiction; -1/'-' dropped)
    #[arg(long)]
    train: PathBuf,
    /// Output folder: a sentence-transformers model (softmax_head.safetensors beside it), its card
    /// README.md, train_log.csv, loss.svg/png; checkpoint/ while it runs
    #[arg(long)]
    out: PathBuf,
    #[arg(long, value_enum, default_value = "softmax")]
    loss: NliLoss,
    /// NLI pairs scored by the softmax classifier's accuracy (softmax loss), or STS/0-1 pairs (mnr)
    #[arg(long)]
    dev: Option<PathBuf>,
    /// The pair columns and the label column, in --train and --dev (`a|b`: the first of those
    /// the file has)
    #[arg(long, default_value = DEFAULT_PAIR_COLUMNS)]
    columns: PairColumns,
    /// Pooling of the sentence embeddings (SBERT's NLI training used mean)
    #[arg(long, value_enum, default_value = "mean")]
    pooling: PoolingMode,
    #[command(flatten)]
    pub(super) train_opts: TrainOpts,
}

pub fn run(a: Args) -> Result<()> {
    let spec = losses::find(match a.loss {
        NliLoss::Softmax => "softmax",
        NliLoss::Mnr => "mnr",
    })
    .expect("a registry loss");
    let opts = biencoder_fit::options(&a.train_opts, Some(a.pooling), 3, None)?;
    let mut task = BiEncoderTask::new(&a.init, spec, &opts)?;
    let (mut pairs, dropped) = read_nli(&a.train, &a.columns)?;
    if a.loss == NliLoss::Mnr {
        pairs = entailments(&pairs);
    }
    out(&format!(
        "{}: {} training pairs{}, {dropped} rows without a gold label dropped\n",
        a.train.display(),
        pairs.len(),
        if a.loss == NliLoss::Mnr {
            " (entailment)"
        } else {
            ""
        }
    ));
    task.data = BiData::from_pairs(&pairs, &task.enc)?;
    if let Some(d) = &a.dev {
        let eo = EvalOptions {
            columns: a.columns.clone(),
            ..Default::default()
        };
        task.dev = Some(match a.loss {
            NliLoss::Mnr => dev_evaluator(d, &eo, false)?,
            NliLoss::Softmax => (accuracy::KIND.load)(d, &eo)?,
        });
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
