use super::metrics::{average_precision, best_accuracy, best_f1, cosine, matthews};
use super::Metrics;
use crate::model::Embeddings;

/// sentence-transformers' BinaryClassificationEvaluator on cosine similarity: best-threshold
/// accuracy and F1 (with precision and recall there), average precision, and MCC at the F1
/// threshold. Labels are 0/1.
pub fn binary_metrics(e1: &Embeddings, e2: &Embeddings, labels: &[bool]) -> Metrics {
    let scores: Vec<f64> = (0..labels.len())
        .map(|i| cosine(e1.row(i), e2.row(i)))
        .collect();
    let (acc, acc_t) = best_accuracy(&scores, labels, true);
    let (f1, p, r, f1_t) = best_f1(&scores, labels, true);
    let pred: Vec<bool> = scores.iter().map(|s| *s >= f1_t).collect();
    [
        ("accuracy", acc),
        ("accuracy_threshold", acc_t),
        ("f1", f1),
        ("f1_threshold", f1_t),
        ("precision", p),
        ("recall", r),
        ("ap", average_precision(&scores, labels)),
        ("mcc", matthews(&pred, labels)),
    ]
    .into_iter()
    .map(|(k, v)| (format!("cosine_{k}"), v))
    .collect()
}
