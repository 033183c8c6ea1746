//! TripletLoss with euclidean distance and margin 5: relu(|a - p| - |a - n| + 5).
use super::{triplet, Loss, LossSpec, Target};
use candle_core::{Result, Tensor};

pub const SPEC: LossSpec = LossSpec {
    name: "triplet",
    help: "TripletLoss: euclidean distance, margin 5",
    columns: "anchor,positive,negative",
    texts: 3,
    more_texts: false,
    target: Target::None,
    per_example: true,
    cached: false,
    build: |_| Ok(Box::new(Triplet)),
};

struct Triplet;

impl Loss for Triplet {
    fn forward(&self, emb: &[Tensor], _: Option<&Tensor>) -> Result<Tensor> {
        triplet(&emb[0], &emb[1], &emb[2], 5.0)
    }
}
