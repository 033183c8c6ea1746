//! TripletLoss with euclidean distance and margin 5: relu(|a - p| - |a - n| + 5).
use super::{triplet, Loss, LossSpec};
use candle_core::{Result, Tensor};

pub const SPEC: LossSpec = LossSpec {
    name: "triplet",
    help: "TripletLoss: euclidean distance, margin 5",
    columns: "anchor,positive,negative",
    texts: 3,
    build: |_| Ok(Box::new(Triplet)),
    ..LossSpec::BASE
};

struct Triplet;

impl Loss for Triplet {
    fn forward(&self, emb: &[Tensor], _: Option<&Tensor>) -> Result<Tensor> {
        triplet(&emb[0], &emb[1], &emb[2], 5.0)
    }
}
