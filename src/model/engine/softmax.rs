//! Attention's row kernels, compiled per CPU class: softmax of a score row (keeping its
//! log-sum-exp), probabilities rebuilt from the log-sum-exp in backward, and the scores'
//! gradient.
use super::rows::{sum, LANES};
use crate::dispatch;
use crate::model::kernels::fastmath::exp_f32;

#[inline(always)]
fn max(x: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; LANES];
    let mut chunks = x.chunks_exact(LANES);
    for c in &mut chunks {
        for (a, v) in acc.iter_mut().zip(c) {
            *a = a.max(*v);
        }
    }
    let mut m = chunks
        .remainder()
        .iter()
        .fold(f32::NEG_INFINITY, |m, v| m.max(*v));
    for a in acc {
        m = m.max(a);
    }
    m
}

dispatch! {
    /// A row of attention scores turned into probabilities in place: softmax(row * scale).
    /// Returns the row's log-sum-exp (of the scaled scores), which backward rebuilds P from.
    pub fn softmax_row(row: &mut [f32], scale: f32) -> f32 {
        for v in row.iter_mut() {
            *v *= scale;
        }
        let m = max(row);
        for v in row.iter_mut() {
            *v = exp_f32(*v - m);
        }
        let total = sum(row);
        let inv = 1.0 / total;
        for v in row.iter_mut() {
            *v *= inv;
        }
        m + total.ln()
    }
}

dispatch! {
    /// Scores back into probabilities from their log-sum-exp: p = exp(s * scale - lse).
    pub fn probs_row(row: &mut [f32], scale: f32, lse: f32) {
        for v in row.iter_mut() {
            *v = exp_f32(*v * scale - lse);
        }
    }
}

dispatch! {
    /// The scores' gradient from the probabilities': ds = scale * p * (dp - d), in place in dp.
    pub fn score_grad_row(dp: &mut [f32], p: &[f32], d: f32, scale: f32) {
        for (g, &q) in dp.iter_mut().zip(p) {
            *g = scale * q * (*g - d);
        }
    }
}

dispatch! {
    /// log(sum(exp(row))), taken from the row's maximum (a classification row's normaliser).
    pub fn log_sum_exp(row: &[f32]) -> f32 {
        let m = max(row);
        let mut acc = [0f32; LANES];
        let mut chunks = row.chunks_exact(LANES);
        for c in &mut chunks {
            for (a, &v) in acc.iter_mut().zip(c) {
                *a += exp_f32(v - m);
            }
        }
        let mut s: f32 = chunks.remainder().iter().map(|&v| exp_f32(v - m)).sum();
        for a in acc {
            s += a;
        }
        m + s.ln()
    }
}

dispatch! {
    /// out = softmax(row) * k, from the row's log-sum-exp (cross-entropy's gradient, less the
    /// one-hot the caller subtracts).
    pub fn scaled_softmax(row: &[f32], lse: f32, k: f32, out: &mut [f32]) {
        for (o, &v) in out.iter_mut().zip(row) {
            *o = exp_f32(v - lse) * k;
        }
    }
}
