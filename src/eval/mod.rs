//! Batch evaluation: STS correlation, binary classification and retrieval, each as
//! sentence-transformers' evaluator defines it.
pub mod attention;
mod classification;
pub mod metrics;
mod report;
pub mod retrieval;
mod sts;

pub use classification::binary_metrics;
pub use report::{EvalReport, EvalResult};
pub use retrieval::{ranking_metrics, retrieval_metrics, RetrievalSet, ScoreFn};
pub use sts::sts_metrics;

use crate::data::{PairColumns, Pairs};
use crate::error::{Error, Result};
use crate::model::{Embeddings, SentenceEncoder};
use indicatif::ProgressBar;
use std::collections::HashMap;
use std::path::Path;

/// Metric name and value, in the evaluator's order.
pub type Metrics = Vec<(String, f64)>;

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

pub fn evaluate_sts(
    enc: &SentenceEncoder,
    path: &Path,
    cols: &PairColumns,
    batch: usize,
    pb: &ProgressBar,
) -> Result<Metrics> {
    sts_pairs(enc, &Pairs::read(path, cols)?, batch, pb)
}

/// STS metrics of pairs already in memory.
pub fn sts_pairs(
    enc: &SentenceEncoder,
    p: &Pairs,
    batch: usize,
    pb: &ProgressBar,
) -> Result<Metrics> {
    let e = encode_unique(enc, &[&p.sentence1, &p.sentence2], batch, pb)?;
    Ok(sts_metrics(&e[0], &e[1], &p.labels))
}

pub fn evaluate_classification(
    enc: &SentenceEncoder,
    path: &Path,
    cols: &PairColumns,
    batch: usize,
    pb: &ProgressBar,
) -> Result<Metrics> {
    let p = Pairs::read(path, cols)?;
    let mut labels = Vec::with_capacity(p.len());
    for (i, &l) in p.labels.iter().enumerate() {
        if l != 0.0 && l != 1.0 {
            return Err(Error::cell(
                path,
                i + 1,
                &cols.label,
                format!("label {l}: binary classification needs 0 or 1"),
            ));
        }
        labels.push(l == 1.0);
    }
    binary_pairs(enc, &p, &labels, batch, pb)
}

/// Binary classification metrics of pairs already in memory.
pub fn binary_pairs(
    enc: &SentenceEncoder,
    p: &Pairs,
    labels: &[bool],
    batch: usize,
    pb: &ProgressBar,
) -> Result<Metrics> {
    let e = encode_unique(enc, &[&p.sentence1, &p.sentence2], batch, pb)?;
    Ok(binary_metrics(&e[0], &e[1], labels))
}

pub fn evaluate_retrieval(
    enc: &SentenceEncoder,
    dir: &Path,
    score: ScoreFn,
    batch: usize,
    pb: &ProgressBar,
) -> Result<Metrics> {
    retrieval_set(enc, &RetrievalSet::load(dir)?, score, batch, pb)
}

/// Retrieval metrics of a set already loaded.
pub fn retrieval_set(
    enc: &SentenceEncoder,
    set: &RetrievalSet,
    score: ScoreFn,
    batch: usize,
    pb: &ProgressBar,
) -> Result<Metrics> {
    let q: Vec<&str> = set.queries.iter().map(|(_, t)| t.as_str()).collect();
    let c: Vec<&str> = set.corpus.iter().map(|(_, t)| t.as_str()).collect();
    pb.set_length((q.len() + c.len()) as u64);
    let (qe, ce) = (enc.encode(&q, batch, pb)?, enc.encode(&c, batch, pb)?);
    Ok(retrieval_metrics(set, &qe, &ce, score))
}
