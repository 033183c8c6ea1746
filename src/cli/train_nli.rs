use super::out;
use super::train_opts::TrainOpts;
use crate::data::{read_nli, PairColumns, Pairs};
use crate::error::{Error, Result};
use crate::model::Pooling;
use crate::train::biencoder::{BiEncoderTask, BiLoss};
use crate::train::dev::DevSet;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Starting model (HF BERT, sentence-transformers folder or Condenser checkpoint)
    #[arg(long)]
    init: PathBuf,
    /// NLI pairs: sentence1, sentence2, label (0/1/2 or entailment/neutral/contradiction; -1/'-' dropped)
    #[arg(long)]
    train: PathBuf,
    #[arg(long)]
    out: PathBuf,
    /// softmax (SBERT's NLI training) or mnr (multiple negatives ranking on the entailment pairs)
    #[arg(long, default_value = "softmax")]
    loss: String,
    /// NLI pairs scored by the softmax classifier's accuracy (softmax loss), or STS/0-1 pairs (mnr)
    #[arg(long)]
    dev: Option<PathBuf>,
    #[arg(long, default_value = "sentence1,sentence2,label")]
    columns: String,
    #[arg(long, default_value = "mean")]
    pooling: String,
    #[arg(long, default_value_t = 128)]
    max_seq_length: usize,
    #[command(flatten)]
    train_opts: TrainOpts,
}

pub fn run(a: Args) -> Result<()> {
    let cols = PairColumns::parse(&a.columns)?;
    let loss = match a.loss.as_str() {
        "softmax" => BiLoss::Softmax { num_labels: 3 },
        "mnr" => BiLoss::Mnr,
        l => {
            return Err(Error::msg(format!(
                "train-nli --loss '{l}': softmax or mnr"
            )))
        }
    };
    let pooling = Some(Pooling::parse(&a.pooling)?);
    let mut task = BiEncoderTask::new(
        &a.init,
        loss,
        pooling,
        a.max_seq_length,
        a.train_opts.seed(),
        &a.train_opts.device()?,
    )?;
    let (mut pairs, dropped) = read_nli(&a.train, &cols)?;
    if loss == BiLoss::Mnr {
        pairs = entailments(pairs);
    }
    out(&format!(
        "{}: {} training pairs{}, {dropped} rows without a gold label dropped\n",
        a.train.display(),
        pairs.len(),
        if loss == BiLoss::Mnr {
            " (entailment)"
        } else {
            ""
        }
    ));
    task.data = task.pair_data(&pairs)?;
    if let Some(d) = &a.dev {
        task.dev = Some(match loss {
            BiLoss::Mnr => DevSet::detect(d, &cols, false)?,
            _ => DevSet::Classes(read_nli(d, &cols)?.0),
        });
    }
    a.train_opts.run(&task, &a.out)
}

fn entailments(p: Pairs) -> Pairs {
    let mut e = Pairs::default();
    for i in 0..p.len() {
        if p.labels[i] == 0.0 {
            e.sentence1.push(p.sentence1[i].clone());
            e.sentence2.push(p.sentence2[i].clone());
            e.labels.push(0.0);
        }
    }
    e
}
