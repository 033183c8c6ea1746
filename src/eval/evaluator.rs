//! One evaluator trait for `evaluate` and for dev evaluation during training (as
//! sentence-transformers' evaluators: each knows its data and declares its primary metric), and
//! the model it scores: a sentence encoder (with a softmax head when it was trained with one) or
//! a cross-encoder.
use crate::error::{Error, Result};
use crate::model::CrossEncoderModel;
use crate::model::{Linear, SentenceEncoder};
use crate::search::{ScoreFn, StoredCorpus};
use indicatif::ProgressBar;
use std::sync::Arc;

/// Metric name and value, in the evaluator's order.
pub type Metrics = Vec<(String, f64)>;

/// What an evaluation measured; its primary metric is always one of its metrics.
#[derive(Clone, Debug)]
pub struct Evaluation {
    pub primary: String,
    pub metrics: Metrics,
    /// The primary metric query by query (id, value), for evaluators whose metric is a mean over
    /// queries (retrieval): what a paired comparison of two models over queries reads.
    pub per_query: Vec<(String, f64)>,
}

impl Evaluation {
    /// Build one, checking that the primary metric is among the metrics.
    pub fn new(primary: impl Into<String>, metrics: Metrics) -> Result<Evaluation> {
        let primary = primary.into();
        if !metrics.iter().any(|(k, _)| *k == primary) {
            return Err(Error::msg(format!(
                "evaluator bug: primary metric {primary} not among {:?}",
                metrics.iter().map(|m| &m.0).collect::<Vec<_>>()
            )));
        }
        Ok(Evaluation {
            primary,
            metrics,
            per_query: Vec::new(),
        })
    }

    pub fn get(&self, name: &str) -> Option<f64> {
        self.metrics
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| *v)
    }

    /// (primary metric, value)
    pub fn score(&self) -> (String, f64) {
        let v = self.get(&self.primary).expect("checked in new");
        (self.primary.clone(), v)
    }
}

/// The model an evaluator scores.
pub enum Model<'a> {
    /// Embeddings compared by similarity; `head` is a SoftmaxLoss classifier where there is one.
    Encoder {
        enc: &'a SentenceEncoder,
        head: Option<&'a Linear>,
        /// The folder it was loaded from (None: weights in training): what a vector cache names
        /// its vectors by.
        folder: Option<&'a std::path::Path>,
    },
    /// A cross-encoder scoring each pair.
    CrossEncoder(&'a CrossEncoderModel),
}

impl<'a> Model<'a> {
    pub fn encoder(enc: &'a SentenceEncoder) -> Model<'a> {
        Model::Encoder {
            enc,
            head: None,
            folder: None,
        }
    }

    /// A loaded model and the folder it came from.
    pub fn loaded(m: &'a crate::model::Loaded, folder: &'a std::path::Path) -> Model<'a> {
        match m {
            crate::model::Loaded::Encoder { enc, head } => Model::Encoder {
                enc,
                head: head.as_ref(),
                folder: Some(folder),
            },
            crate::model::Loaded::CrossEncoder(ce) => Model::CrossEncoder(ce),
        }
    }
}

pub trait Evaluator: Send + Sync {
    /// The kind this evaluator is (its task name and headline metrics for reports).
    fn kind(&self) -> &'static EvaluatorKind;
    /// Score `model`, encoding or predicting in batches of `batch`.
    fn run(&self, model: &Model, batch: usize, progress: &ProgressBar) -> Result<Evaluation>;
}

/// The settings evaluators read their data with.
#[derive(Clone, Debug, Default)]
pub struct EvalOptions {
    pub columns: crate::data::PairColumns,
    pub score_fn: ScoreFn,
    /// A BEIR folder's qrels split (`qrels/<split>.tsv`).
    pub split: Option<String>,
    /// BEIR's ignore_identical_ids: a document with the query's own id is never a hit.
    pub ignore_identical_ids: bool,
    /// Retrieval: the corpus's stored vectors (checked against the one model evaluated), read
    /// instead of embedding the corpus.
    pub corpus_embeddings: Option<Arc<StoredCorpus>>,
    /// Retrieval: a folder keeping each model's corpus vectors for later evaluations of the same
    /// model on the same corpus (`--vector-cache`).
    pub vector_cache: Option<super::vector_cache::VectorCache>,
}

/// An evaluator kind: its `evaluate` flag (`--<flag> NAME=PATH`), help, and how it reads its data.
pub struct EvaluatorKind {
    pub flag: &'static str,
    /// The task a report names (results.json's "task").
    pub task: &'static str,
    /// The metrics shown on the terminal, in order (everything is in the files); a retrieval
    /// metric matches with its score function's prefix (cos_sim_ndcg@10).
    pub headline: &'static [&'static str],
    pub help: &'static str,
    pub load: fn(&std::path::Path, &EvalOptions) -> Result<Box<dyn Evaluator>>,
}
