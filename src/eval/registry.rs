//! Every evaluator kind, and the one that fits a dev set during training.
use super::evaluator::{EvalOptions, Evaluator, EvaluatorKind};
use super::{accuracy, classification, retrieval, sts};
use crate::data::Pairs;
use crate::error::Result;
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
