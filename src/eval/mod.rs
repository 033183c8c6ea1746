//! Evaluation: one evaluator a file behind one trait (sentence-transformers' evaluation/ folder),
//! used by `evaluate` and by dev evaluation during training; the metrics; the [CLS] attention
//! analysis and the similarity matrix; methods over seeds (`seeds`, for `report`).
pub mod accuracy;
pub mod attention;
pub mod classification;
pub mod correlation;
mod evaluator;
pub mod metrics;
mod report;
pub mod retrieval;
pub mod seeds;
pub mod similarity;
pub mod sts;

pub use classification::binary_metrics;
pub use evaluator::{
    CorpusVectors, EvalOptions, Evaluation, Evaluator, EvaluatorKind, Metrics, Model, Task,
};
pub use report::{EvalReport, EvalResult};
pub use retrieval::{ranking_metrics, ScoreFn};
pub use sts::sts_metrics;

use crate::data::Pairs;
use crate::error::Result;
use crate::model::{Embeddings, SentenceEncoder};
use indicatif::ProgressBar;
use std::collections::HashMap;
use std::path::Path;

/// Every evaluator kind: `evaluate` takes one `--<flag> NAME=PATH` option per entry. Adding an
/// evaluator is its file and one line here.
pub const EVALUATORS: &[EvaluatorKind] = &[
    sts::KIND,
    classification::KIND,
    retrieval::KIND,
    accuracy::KIND,
];

/// The evaluator for dev data, chosen by its shape: a folder is a retrieval set; pairs with
/// class ids (`classes`: the model predicts classes) are scored by accuracy; pairs labelled only
/// 0/1 by binary classification; other scores by STS correlation.
pub fn dev_evaluator(path: &Path, opts: &EvalOptions, classes: bool) -> Result<Box<dyn Evaluator>> {
    if path.is_dir() {
        return (retrieval::KIND.load)(path, opts);
    }
    if classes {
        return (accuracy::KIND.load)(path, opts);
    }
    let p = Pairs::read(path, &opts.columns)?;
    let binary = p.labels.iter().all(|&l| l == 0.0 || l == 1.0);
    if binary {
        (classification::KIND.load)(path, opts)
    } else {
        (sts::KIND.load)(path, opts)
    }
}

/// Encode each distinct text once and spread the rows back (pair sets repeat sentences often).
pub fn encode_unique(
    enc: &SentenceEncoder,
    texts: &[&[String]],
    batch: usize,
    pb: &ProgressBar,
) -> Result<Vec<Embeddings>> {
    let mut index: HashMap<&str, usize> = HashMap::new();
    let mut unique: Vec<&str> = Vec::new();
    for t in texts.iter().flat_map(|s| s.iter()) {
        index.entry(t.as_str()).or_insert_with(|| {
            unique.push(t.as_str());
            unique.len() - 1
        });
    }
    pb.set_length(unique.len() as u64);
    let emb = enc.encode(&unique, batch, pb)?;
    Ok(texts
        .iter()
        .map(|side| {
            let mut data = Vec::with_capacity(side.len() * emb.dim);
            for t in side.iter() {
                data.extend_from_slice(emb.row(index[t.as_str()]));
            }
            Embeddings { dim: emb.dim, data }
        })
        .collect())
}
