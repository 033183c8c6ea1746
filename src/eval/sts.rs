use super::metrics::{cosine, dot, euclidean, manhattan, pearson, spearman};
use super::Metrics;
use crate::model::Embeddings;

/// sentence-transformers' EmbeddingSimilarityEvaluator: Pearson and Spearman of cosine, dot,
/// (negative) euclidean and manhattan similarity against the gold scores, plus the maxima.
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
