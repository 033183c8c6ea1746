//! Binary pair classification: sentence-transformers' BinaryClassificationEvaluator on cosine
//! similarity for an encoder, on the scores for a cross-encoder. Best-threshold accuracy and F1
//! (with precision and recall there), average precision, and MCC at the F1 threshold.
use super::evaluator::{EvalOptions, Evaluation, Evaluator, EvaluatorKind, Metrics, Model};
use super::metrics::{average_precision, best_accuracy, best_f1, cosine, matthews};
use super::unique::encode_unique;
use crate::data::Pairs;
use crate::error::{Error, Result};
use crate::model::Embeddings;
use indicatif::ProgressBar;
use std::path::Path;

pub const KIND: EvaluatorKind = EvaluatorKind {
    flag: "classification",
    task: "classification",
    headline: &["cosine_accuracy", "cosine_f1", "cosine_ap", "ap"],
    help: "binary pairs (sentence1, sentence2, label 0/1) as NAME=PATH: accuracy, F1 and average \
           precision of cosine similarity (an encoder) or of the scores (a cross-encoder)",
    load: |path, opts| Ok(Box::new(BinaryEvaluator::read(path, opts)?)),
};

pub struct BinaryEvaluator {
    pub pairs: Pairs,
    pub labels: Vec<bool>,
}

impl BinaryEvaluator {
    pub fn read(path: &Path, opts: &EvalOptions) -> Result<BinaryEvaluator> {
        let pairs = Pairs::read(path, &opts.columns)?;
        if pairs.is_empty() {
            return Err(Error::file(path, "no pairs to evaluate"));
        }
        let mut labels = Vec::with_capacity(pairs.len());
        for (i, &l) in pairs.labels.iter().enumerate() {
            if l != 0.0 && l != 1.0 {
                return Err(Error::cell(
                    path,
                    i + 1,
                    &pairs.label_column,
                    format!("label {l}: binary classification needs 0 or 1"),
                ));
            }
            labels.push(l == 1.0);
        }
        Ok(BinaryEvaluator { pairs, labels })
    }
}

impl Evaluator for BinaryEvaluator {
    fn kind(&self) -> &'static EvaluatorKind {
        &KIND
    }

    fn run(&self, model: &Model, batch: usize, progress: &ProgressBar) -> Result<Evaluation> {
        let p = &self.pairs;
        match model {
            Model::Encoder { enc, .. } => {
                let e = encode_unique(enc, &[&p.sentence1, &p.sentence2], batch, progress)?;
                Evaluation::new("cosine_ap", binary_metrics(&e[0], &e[1], &self.labels))
            }
            Model::CrossEncoder(ce) => {
                let s = ce.scores(&p.pairs(), batch, progress)?;
                Evaluation::new("ap", score_metrics(&s, &self.labels, ""))
            }
        }
    }
}

/// The metrics of cosine similarity between paired embeddings.
pub fn binary_metrics(e1: &Embeddings, e2: &Embeddings, labels: &[bool]) -> Metrics {
    let scores: Vec<f64> = (0..labels.len())
        .map(|i| cosine(e1.row(i), e2.row(i)))
        .collect();
    score_metrics(&scores, labels, "cosine_")
}

/// The metrics of any score where higher means positive, names prefixed by `prefix`.
pub fn score_metrics(scores: &[f64], labels: &[bool], prefix: &str) -> Metrics {
    let (acc, acc_t) = best_accuracy(scores, labels, true);
    let (f1, p, r, f1_t) = best_f1(scores, labels, true);
    let pred: Vec<bool> = scores.iter().map(|s| *s >= f1_t).collect();
    [
        ("accuracy", acc),
        ("accuracy_threshold", acc_t),
        ("f1", f1),
        ("f1_threshold", f1_t),
        ("precision", p),
        ("recall", r),
        ("ap", average_precision(scores, labels)),
        ("mcc", matthews(&pred, labels)),
    ]
    .into_iter()
    .map(|(k, v)| (format!("{prefix}{k}"), v))
    .collect()
}
