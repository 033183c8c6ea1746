//! Class accuracy of pairs labelled with class ids: a SoftmaxLoss classifier on (u, v, |u - v|)
//! of an encoder's embeddings (SBERT's NLI training), or a cross-encoder's most probable class.
//! NLI files may name the classes (entailment, neutral, contradiction); unlabelled rows (-1, "-")
//! are dropped.
use super::evaluator::{EvalOptions, Evaluation, Evaluator, EvaluatorKind, Model};
use super::unique::encode_unique;
use crate::data::{read_classes, Pairs};
use crate::error::{Context, Error, Result};
use crate::model::Linear;
use candle_core::{Module, Tensor};
use indicatif::ProgressBar;
use std::path::Path;

pub const KIND: EvaluatorKind = EvaluatorKind {
    flag: "accuracy",
    task: "nli",
    headline: &["accuracy"],
    help: "pairs labelled with class ids (NLI: 0/1/2 or entailment/neutral/contradiction) as \
           NAME=PATH: accuracy of a softmax head (an encoder trained with one) or a cross-encoder",
    load: |path, opts| Ok(Box::new(AccuracyEvaluator::read(path, opts)?)),
};

pub struct AccuracyEvaluator {
    pub pairs: Pairs,
}

impl AccuracyEvaluator {
    pub fn read(path: &Path, opts: &EvalOptions) -> Result<AccuracyEvaluator> {
        let (pairs, _) = read_classes(path, &opts.columns)?;
        if pairs.is_empty() {
            return Err(Error::file(path, "no labelled pairs to evaluate"));
        }
        Ok(AccuracyEvaluator { pairs })
    }
}

impl Evaluator for AccuracyEvaluator {
    fn kind(&self) -> &'static EvaluatorKind {
        &KIND
    }

    fn run(&self, model: &Model, batch: usize, progress: &ProgressBar) -> Result<Evaluation> {
        let p = &self.pairs;
        let predicted: Vec<usize> = match model {
            Model::Encoder { enc, head, .. } => {
                let head = head.ok_or_else(|| {
                    Error::msg(
                        "class accuracy of an encoder needs its softmax head (softmax_head.safetensors, \
                         written by train-biencoder --loss softmax)",
                    )
                })?;
                let e = encode_unique(enc, &[&p.sentence1, &p.sentence2], batch, progress)?;
                head_classes(&e, head)?
            }
            Model::CrossEncoder(ce) => ce
                .predict(&p.pairs(), batch, progress)?
                .iter()
                .map(|s| argmax(s))
                .collect(),
        };
        let hits = predicted
            .iter()
            .zip(&p.labels)
            .filter(|(c, l)| **c as f64 == **l)
            .count();
        Evaluation::new(
            "accuracy",
            vec![("accuracy".into(), hits as f64 / p.len() as f64)],
        )
    }
}

pub fn argmax(s: &[f32]) -> usize {
    s.iter()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map_or(0, |m| m.0)
}

/// The softmax head's class for each pair of embeddings.
fn head_classes(e: &[crate::model::Embeddings], head: &Linear) -> Result<Vec<usize>> {
    let dev = head.weight.device();
    let t = |x: &crate::model::Embeddings| Tensor::from_slice(&x.data, (x.len(), x.dim), dev);
    let features = crate::model::layers::softmax_head::softmax_features(&t(&e[0])?, &t(&e[1])?)?;
    let pred = head
        .forward(&features)
        .and_then(|l| l.argmax(1)?.to_vec1::<u32>())
        .doing("softmax head")?;
    Ok(pred.into_iter().map(|c| c as usize).collect())
}
