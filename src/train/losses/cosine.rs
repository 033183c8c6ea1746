//! CosineSimilarityLoss: MSE between cos(u, v) and a [0, 1] label (AugSBERT's bi-encoder loss).
use super::{cosine_mse, required, Loss, LossSpec, Target};
use candle_core::{Result, Tensor};

pub const SPEC: LossSpec = LossSpec {
    name: "cosine",
    help: "CosineSimilarityLoss: MSE of cos(u, v) against a score in [-1, 1] (STS: 0-5 / 5)",
    columns: "sentence1,sentence2,label|score",
    target: Target::Score,
    score_range: Some((-1.0, 1.0)),
    build: |_| Ok(Box::new(Cosine)),
    ..LossSpec::BASE
};

struct Cosine;

impl Loss for Cosine {
    fn forward(&self, emb: &[Tensor], target: Option<&Tensor>) -> Result<Tensor> {
        cosine_mse(&emb[0], &emb[1], required(target, &SPEC)?)
    }
}
