//! SoftmaxLoss: a linear classifier on (u, v, |u - v|), cross-entropy over the classes (SBERT's
//! NLI training). The classifier is saved beside the encoder as softmax_head.safetensors.
use super::{cross_entropy, required, softmax_features, Loss, LossSpec, Target};
use crate::model::Linear;
use candle_core::{DType, Module, Result, Tensor};

pub const HEAD: &str = "softmax_head";

pub const SPEC: LossSpec = LossSpec {
    name: "softmax",
    help: "SoftmaxLoss: Linear(3 dim, num_labels) on (u, v, |u - v|), cross-entropy",
    columns: "sentence1,sentence2,label|score",
    target: Target::Class,
    build: |cx| {
        let head = Linear::load(cx.vb.pp(HEAD), 3 * cx.dim, cx.num_labels)?;
        Ok(Box::new(Softmax { head }))
    },
    ..LossSpec::BASE
};

struct Softmax {
    head: Linear,
}

impl Loss for Softmax {
    fn forward(&self, emb: &[Tensor], target: Option<&Tensor>) -> Result<Tensor> {
        let logits = self.head.forward(&softmax_features(&emb[0], &emb[1])?)?;
        cross_entropy(&logits, &required(target, &SPEC)?.to_dtype(DType::U32)?)
    }

    fn head(&self) -> Option<(&'static str, &Linear)> {
        Some((HEAD, &self.head))
    }
}
