//! MSELoss: each embedding against a teacher's embedding of the same text (distillation).
use super::{mse, required, Loss, LossSpec, Target};
use candle_core::{Result, Tensor};

pub const SPEC: LossSpec = LossSpec {
    name: "mse",
    help: "MSELoss: the embedding against a teacher vector (a list column, as `encode` writes)",
    columns: "sentence,embedding",
    texts: 1,
    target: Target::Vector,
    build: |_| Ok(Box::new(Mse)),
    ..LossSpec::BASE
};

struct Mse;

impl Loss for Mse {
    fn forward(&self, emb: &[Tensor], target: Option<&Tensor>) -> Result<Tensor> {
        mse(&emb[0], required(target, &SPEC)?)
    }
}
