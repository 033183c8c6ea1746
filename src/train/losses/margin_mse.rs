//! MarginMSELoss (Hofstätter et al.; GPL's training loss): the student's margin
//! dot(q, p) - dot(q, n) regressed on a teacher's margin (a cross-encoder's score of (q, p) minus
//! its score of (q, n)), mean squared error.
use super::{margin_mse, required, Loss, LossSpec, Target};
use candle_core::{Result, Tensor};

pub const SPEC: LossSpec = LossSpec {
    name: "margin-mse",
    help: "MarginMSELoss: dot(q,p) - dot(q,n) against the teacher's margin (as GPL)",
    columns: "anchor,positive,negative,margin|label|score",
    texts: 3,
    target: Target::Score,
    build: |_| Ok(Box::new(MarginMse)),
    ..LossSpec::BASE
};

struct MarginMse;

impl Loss for MarginMse {
    fn forward(&self, emb: &[Tensor], target: Option<&Tensor>) -> Result<Tensor> {
        margin_mse(&emb[0], &emb[1], &emb[2], required(target, &SPEC)?)
    }
}
