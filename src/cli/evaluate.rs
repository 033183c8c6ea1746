use super::eval_sets::EvalSets;
use super::index::UseIndex;
use super::model_opts::ModelOpts;
use super::{out, progress};
use condenser::data::PairColumns;
use condenser::encode::{corpus_vectors, StoredEmbeddings};
use condenser::error::{Error, Result};
use condenser::eval::{EvalOptions, EvalReport, ScoreFn, EVALUATORS};
use condenser::flags;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Model folders (sentence encoders, HF BERT or cross-encoders); each is evaluated on every dataset
    #[arg(long = flags::MODEL, required = true)]
    models: Vec<PathBuf>,
    #[command(flatten)]
    sets: EvalSets,
    /// Pair columns: sentence1,sentence2,label
    #[arg(long, default_value = "sentence1,sentence2,label")]
    columns: PairColumns,
    /// Retrieval score
    #[arg(long, value_enum, default_value = "cosine")]
    score_fn: ScoreFn,
    /// Retrieval folders with a qrels/ directory: the qrels split to read (qrels/SPLIT.tsv)
    #[arg(long)]
    split: Option<String>,
    /// Retrieval: a document whose id equals the query's never counts as a hit (BEIR's option)
    #[arg(long)]
    ignore_identical_ids: bool,
    /// Retrieval: the corpus's vectors as `encode` wrote them with the one --model evaluated (a
    /// file, or a sharded encode's folder); refused when made otherwise
    #[arg(long)]
    corpus_embeddings: Option<PathBuf>,
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..))]
    batch_size: u64,
    /// Output folder for results.json and results.csv
    #[arg(long = flags::OUT, default_value = "out/eval")]
    out: PathBuf,
    #[command(flatten)]
    use_index: UseIndex,
    #[command(flatten)]
    model: ModelOpts,
}

pub fn run(a: Args) -> Result<()> {
    if a.sets.0.is_empty() {
        let flags: Vec<String> = EVALUATORS.iter().map(|k| format!("--{}", k.flag)).collect();
        return Err(Error::msg(format!(
            "nothing to evaluate: give datasets with {}",
            flags.join(", ")
        )));
    }
    let inference = a.model.inference()?;
    let corpus_embeddings = match &a.corpus_embeddings {
        None => None,
        Some(path) => {
            if a.sets
                .0
                .iter()
                .any(|(k, _)| EVALUATORS[*k].flag != "retrieval")
            {
                return Err(Error::msg(
                    "--corpus-embeddings are a retrieval corpus's vectors: evaluate --retrieval sets only with them",
                ));
            }
            let [model] = a.models.as_slice() else {
                return Err(Error::msg(
                    "--corpus-embeddings hold one model's vectors: evaluate one --model with them",
                ));
            };
            let enc = inference.encoder(model)?;
            let stored = StoredEmbeddings::for_model(path, &enc, model)?;
            let breadth = a.use_index.breadth();
            Some(corpus_vectors(stored, a.use_index.index.clone(), breadth))
        }
    };
    let opts = EvalOptions {
        columns: a.columns.clone(),
        score_fn: a.score_fn,
        split: a.split.clone(),
        ignore_identical_ids: a.ignore_identical_ids,
        corpus_embeddings,
    };
    let evaluators = a
        .sets
        .0
        .iter()
        .map(|(k, set)| Ok((set.name.clone(), (EVALUATORS[*k].load)(&set.path, &opts)?)))
        .collect::<Result<Vec<_>>>()?;
    let report = EvalReport::run(
        &a.models,
        &evaluators,
        &inference,
        a.batch_size as usize,
        |model, name| progress::bar(Some(0), &format!("texts ({model} on {name})")),
    )?;
    report.save(&a.out)?;
    out(&format!(
        "{}\nwrote {}/results.{{json,csv}}\n{}\n",
        report.table(),
        a.out.display(),
        a.model.matmuls()
    ));
    Ok(())
}
