//! Losses, each built from differentiable ops (gradient-checked in tests/gradcheck.rs).
use candle_core::{Result, Tensor, D};

/// Binary cross-entropy with logits, mean over elements, in the numerically stable form
/// max(x, 0) - x y + log(1 + exp(-|x|)) (torch's BCEWithLogitsLoss).
pub fn bce_with_logits(logits: &Tensor, targets: &Tensor) -> Result<Tensor> {
    let softplus = (logits.abs()?.neg()?.exp()? + 1.0)?.log()?;
    (logits.relu()? - (logits * targets)?)?
        .add(&softplus)?
        .mean_all()
}

/// Cross-entropy of logits (b, c) against class ids (b,), mean over the batch.
pub fn cross_entropy(logits: &Tensor, classes: &Tensor) -> Result<Tensor> {
    let max = logits.max_keepdim(D::Minus1)?;
    let shifted = logits.broadcast_sub(&max)?;
    let log_probs = shifted.broadcast_sub(&shifted.exp()?.sum_keepdim(D::Minus1)?.log()?)?;
    log_probs
        .gather(&classes.unsqueeze(1)?, 1)?
        .neg()?
        .mean_all()
}
