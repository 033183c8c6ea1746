//! STS: sentence-transformers' EmbeddingSimilarityEvaluator for an encoder (Pearson and Spearman
//! of cosine, dot, euclidean and manhattan similarity against the gold scores), and its
//! CECorrelationEvaluator for a cross-encoder (of its scores).
use super::evaluator::{EvalOptions, Evaluation, Evaluator, EvaluatorKind, Metrics, Model};
use super::metrics::{cosine, dot, euclidean, manhattan, pearson, spearman};
use super::unique::encode_unique;
use crate::data::Pairs;
use crate::error::{Error, Result};
use crate::model::Embeddings;
use indicatif::ProgressBar;
use std::path::Path;

pub const KIND: EvaluatorKind = EvaluatorKind {
    flag: "sts",
    task: "sts",
    headline: &["spearman_cosine", "pearson_cosine", "spearman", "pearson"],
    help: "STS pairs (sentence1, sentence2, score) as NAME=PATH: Spearman/Pearson of similarity \
           (an encoder) or of the scores (a cross-encoder)",
    load: |path, opts| Ok(Box::new(StsEvaluator::read(path, opts)?)),
};

pub struct StsEvaluator {
    pub pairs: Pairs,
}

impl StsEvaluator {
    pub fn read(path: &Path, opts: &EvalOptions) -> Result<StsEvaluator> {
        let pairs = Pairs::read(path, &opts.columns)?;
        if pairs.is_empty() {
            return Err(Error::file(path, "no pairs to evaluate"));
        }
        Ok(StsEvaluator { pairs })
    }
}

impl Evaluator for StsEvaluator {
    fn kind(&self) -> &'static EvaluatorKind {
        &KIND
    }

    fn run(&self, model: &Model, batch: usize, progress: &ProgressBar) -> Result<Evaluation> {
        let p = &self.pairs;
        match model {
            Model::Encoder { enc, .. } => {
                let e = encode_unique(enc, &[&p.sentence1, &p.sentence2], batch, progress)?;
                Evaluation::new("spearman_cosine", sts_metrics(&e[0], &e[1], &p.labels))
            }
            Model::CrossEncoder(ce) => {
                let s = ce.scores(&p.pairs(), batch, progress)?;
                Evaluation::new(
                    "spearman",
                    vec![
                        ("pearson".into(), pearson(&p.labels, &s)),
                        ("spearman".into(), spearman(&p.labels, &s)),
                    ],
                )
            }
        }
    }
}

/// Pearson and Spearman of cosine, dot, (negative) euclidean and manhattan similarity against
/// the gold scores, plus the maxima.
pub fn sts_metrics(e1: &Embeddings, e2: &Embeddings, gold: &[f64]) -> Metrics {
    type Sim = fn(&[f32], &[f32]) -> f64;
    let sims: [(&str, Sim); 4] = [
        ("cosine", cosine),
        ("dot", dot),
        ("euclidean", |a, b| -euclidean(a, b)),
        ("manhattan", |a, b| -manhattan(a, b)),
    ];
    let mut m = Metrics::new();
    let (mut pmax, mut smax) = (f64::NEG_INFINITY, f64::NEG_INFINITY);
    for (name, f) in sims {
        let scores: Vec<f64> = (0..gold.len()).map(|i| f(e1.row(i), e2.row(i))).collect();
        let (p, s) = (pearson(gold, &scores), spearman(gold, &scores));
        pmax = pmax.max(p);
        smax = smax.max(s);
        m.push((format!("pearson_{name}"), p));
        m.push((format!("spearman_{name}"), s));
    }
    m.push(("pearson_max".into(), pmax));
    m.push(("spearman_max".into(), smax));
    m
}
