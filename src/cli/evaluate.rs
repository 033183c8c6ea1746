use super::{named_path, out, progress, ModelOpts};
use crate::data::PairColumns;
use crate::error::{Error, Result};
use crate::eval::{self, EvalReport, EvalResult, ScoreFn};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Model folders (HF BERT or sentence-transformers); each is evaluated on every dataset
    #[arg(long = "model", required = true)]
    models: Vec<PathBuf>,
    /// STS pair datasets (sentence1, sentence2, label) as NAME=PATH
    #[arg(long = "sts", value_name = "NAME=PATH")]
    sts: Vec<String>,
    /// Binary pair-classification datasets (label 0/1) as NAME=PATH
    #[arg(long = "classification", value_name = "NAME=PATH")]
    classification: Vec<String>,
    /// Retrieval folders (queries, corpus, qrels) as NAME=DIR
    #[arg(long = "retrieval", value_name = "NAME=DIR")]
    retrieval: Vec<String>,
    /// Pair columns: sentence1,sentence2,label
    #[arg(long, default_value = "sentence1,sentence2,label")]
    columns: String,
    /// Retrieval score: cosine or dot
    #[arg(long, default_value = "cosine")]
    score_fn: String,
    #[arg(long, default_value_t = 32)]
    batch_size: usize,
    /// Output folder for results.json and results.csv
    #[arg(long, default_value = "out/eval")]
    out: PathBuf,
    #[command(flatten)]
    model: ModelOpts,
}

pub fn run(a: Args) -> Result<()> {
    let cols = PairColumns::parse(&a.columns)?;
    let score = match a.score_fn.as_str() {
        "cosine" => ScoreFn::Cosine,
        "dot" => ScoreFn::Dot,
        s => {
            return Err(Error::msg(format!(
                "--score-fn '{s}': expected cosine or dot"
            )))
        }
    };
    if a.sts.is_empty() && a.classification.is_empty() && a.retrieval.is_empty() {
        return Err(Error::msg(
            "nothing to evaluate: give --sts, --classification or --retrieval datasets",
        ));
    }
    let mut report = EvalReport::default();
    for dir in &a.models {
        let enc = a.model.load(dir)?;
        let model = dir.display().to_string();
        let tasks = a
            .sts
            .iter()
            .map(|s| ("sts", s))
            .chain(a.classification.iter().map(|s| ("classification", s)))
            .chain(a.retrieval.iter().map(|s| ("retrieval", s)));
        for (task, spec) in tasks {
            let (name, path) = named_path(spec);
            let pb = progress::bar(Some(0), &format!("texts ({model} on {name})"));
            let metrics = match task {
                "sts" => eval::evaluate_sts(&enc, &path, &cols, a.batch_size, &pb)?,
                "classification" => {
                    eval::evaluate_classification(&enc, &path, &cols, a.batch_size, &pb)?
                }
                _ => eval::evaluate_retrieval(&enc, &path, score, a.batch_size, &pb)?,
            };
            pb.finish_and_clear();
            report.results.push(EvalResult {
                model: model.clone(),
                dataset: name,
                task,
                metrics,
            });
        }
    }
    report.save(&a.out)?;
    out(&format!(
        "{}\nwrote {}/results.{{json,csv}}\n",
        report.table(),
        a.out.display()
    ));
    Ok(())
}
