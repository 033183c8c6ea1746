//! Evaluation during bi-encoder training, chosen by the dev data's shape: a retrieval folder
//! (queries, corpus, qrels) gives nDCG@10; pairs with class ids and a softmax head give the head's
//! accuracy; pairs labelled only 0/1 give cosine average precision; other scores give STS Spearman.
use crate::data::{PairColumns, Pairs};
use crate::error::{Error, Result};
use crate::eval::{binary_pairs, encode_unique, retrieval_set, sts_pairs, RetrievalSet, ScoreFn};
use crate::model::{Linear, SentenceEncoder};
use crate::train::losses::softmax_features;
use candle_core::{Module, Tensor};
use indicatif::ProgressBar;
use std::path::Path;

pub enum DevSet {
    Sts(Pairs),
    Binary(Pairs),
    Classes(Pairs),
    Retrieval(RetrievalSet),
}

impl DevSet {
    /// Read `path`; `classes` says the model has a softmax head to be scored by accuracy.
    pub fn detect(path: &Path, cols: &PairColumns, classes: bool) -> Result<DevSet> {
        if path.is_dir() {
            return Ok(DevSet::Retrieval(RetrievalSet::load(path)?));
        }
        let p = Pairs::read(path, cols)?;
        if p.is_empty() {
            return Err(Error::file(path, "empty dev set"));
        }
        Ok(if classes {
            DevSet::Classes(p)
        } else if p.labels.iter().all(|&l| l == 0.0 || l == 1.0) {
            DevSet::Binary(p)
        } else {
            DevSet::Sts(p)
        })
    }

    /// (metric name, value), higher is better.
    pub fn evaluate(&self, enc: &SentenceEncoder, head: Option<&Linear>) -> Result<(String, f64)> {
        let pb = ProgressBar::hidden();
        let pick = |m: crate::eval::Metrics, name: &str| {
            let v = m.iter().find(|(k, _)| k.ends_with(name)).map(|(_, v)| *v);
            (name.to_string(), v.unwrap_or(f64::NAN))
        };
        Ok(match self {
            DevSet::Sts(p) => pick(sts_pairs(enc, p, 64, &pb)?, "spearman_cosine"),
            DevSet::Binary(p) => {
                let labels: Vec<bool> = p.labels.iter().map(|&l| l == 1.0).collect();
                pick(binary_pairs(enc, p, &labels, 64, &pb)?, "cosine_ap")
            }
            DevSet::Retrieval(set) => pick(
                retrieval_set(enc, set, ScoreFn::Cosine, 64, &pb)?,
                "ndcg@10",
            ),
            DevSet::Classes(p) => {
                let head =
                    head.ok_or_else(|| Error::msg("class accuracy needs the softmax head"))?;
                let e = encode_unique(enc, &[&p.sentence1, &p.sentence2], 64, &pb)?;
                ("accuracy".to_string(), accuracy(&e, head, &p.labels)?)
            }
        })
    }
}

/// Accuracy of the softmax head on (u, v, |u - v|) of embedded pairs.
pub fn accuracy(e: &[crate::model::Embeddings], head: &Linear, labels: &[f64]) -> Result<f64> {
    let dev = head.weight.device();
    let t = |x: &crate::model::Embeddings| Tensor::from_slice(&x.data, (x.len(), x.dim), dev);
    let pred: Vec<u32> = (|| {
        let logits = head.forward(&softmax_features(&t(&e[0])?, &t(&e[1])?)?)?;
        logits.argmax(1)?.to_vec1::<u32>()
    })()
    .map_err(|e| Error::msg(format!("softmax head failed: {e}")))?;
    let hits = pred
        .iter()
        .zip(labels)
        .filter(|(p, l)| **p as f64 == **l)
        .count();
    Ok(hits as f64 / labels.len().max(1) as f64)
}
