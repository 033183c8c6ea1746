use super::eval_sets::EvalSets;
use super::model_opts::ModelOpts;
use super::progress::{self, out};
use super::search_flags::{score_fn, UseIndex};
use crate::data::Io;
use crate::data::{PairColumns, DEFAULT_PAIR_COLUMNS};
use crate::error::{Error, Result};
use crate::eval::{EvalOptions, EvalReport, EVALUATORS};
use crate::flags::{self, CorpusEmbeddings, InferenceBatch, VectorCacheDir};
use crate::search::{ScoreFn, StoredEmbeddings};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Model folders (sentence encoders, HF BERT or cross-encoders); each is evaluated on every dataset
    #[arg(value_parser = crate::model::folders::home::parse_model, long = flags::MODEL, required = true)]
    models: Vec<PathBuf>,
    #[command(flatten)]
    sets: EvalSets,
    /// Pair columns: sentence1,sentence2,label (`a|b`: the first of those the file has)
    #[arg(long, default_value = DEFAULT_PAIR_COLUMNS)]
    columns: PairColumns,
    /// Retrieval score
    #[arg(long, value_parser = score_fn(), default_value = "cosine")]
    score_fn: ScoreFn,
    /// Retrieval folders with a qrels/ directory: the qrels split to read (qrels/SPLIT.tsv)
    #[arg(long)]
    split: Option<String>,
    /// Retrieval: a document whose id equals the query's never counts as a hit (BEIR's option)
    #[arg(long)]
    ignore_identical_ids: bool,
    // (retrieval sets, one --model)
    #[command(flatten)]
    corpus: CorpusEmbeddings,
    #[command(flatten)]
    vectors: VectorCacheDir,
    #[command(flatten)]
    batch: InferenceBatch,
    /// Output folder for results.json and results.csv
    #[arg(long = flags::OUT, default_value = "out/eval")]
    out: PathBuf,
    #[command(flatten)]
    use_index: UseIndex,
    #[command(flatten)]
    model: ModelOpts,
}

pub fn run(a: Args) -> Result<()> {
    a.sets.require_some()?;
    let inference = a.model.inference()?;
    let corpus_embeddings = match &a.corpus.corpus_embeddings {
        None => None,
        Some(path) => {
            if !a.sets.retrieval_only() {
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
            let store = StoredEmbeddings::for_model(path, &enc, model)?;
            Some(std::sync::Arc::new(a.use_index.over(store)))
        }
    };
    let opts = EvalOptions {
        columns: a.columns.clone(),
        score_fn: a.score_fn,
        split: a.split.clone(),
        ignore_identical_ids: a.ignore_identical_ids,
        corpus_embeddings,
        vector_cache: a.vectors.cache(),
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
        a.batch.batch_size,
        |model, name| progress::bar(Some(0), &format!("texts ({model} on {name})")),
    )?;
    report.save(&a.out)?;
    // the metrics as results.json holds them, for a caller that captures (Python)
    let results = a.out.join("results.json");
    if let Ok(v) = std::fs::read_to_string(&results)
        .map_err(|_| ())
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).map_err(|_| ()))
    {
        super::summary::record("results", v);
    }
    out(&format!(
        "{}\nwrote {}/results.{{json,csv}}\n{}\n",
        report.table(),
        a.out.display(),
        a.model.matmuls()
    ));
    Ok(())
}

impl Args {
    pub fn io(&self) -> Io {
        let io = Io::new()
            .inputs("--model", &self.models)
            .inputs("--corpus-embeddings", &self.corpus.corpus_embeddings)
            .inputs("--index", &self.use_index.index);
        let io = self.vectors.outputs(io);
        self.sets.inputs(io).output("--out", &self.out)
    }
}
