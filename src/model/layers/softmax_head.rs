//! SBERT's softmax classifier input (SoftmaxLoss in training, class accuracy in evaluation).
use candle_core::{Result, Tensor, D};

/// (u, v, |u - v|) concatenated, (b, 3d).
pub fn softmax_features(u: &Tensor, v: &Tensor) -> Result<Tensor> {
    Tensor::cat(&[u, v, &(u - v)?.abs()?], D::Minus1)
}
