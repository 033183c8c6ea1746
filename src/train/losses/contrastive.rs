//! DPR's contrastive loss: in-batch ranking by dot product (scale 1), with any hard negatives.
use super::{Loss, LossSpec, Ranking};
use candle_core::{Result, Tensor};

pub const SPEC: LossSpec = LossSpec {
    name: "contrastive",
    help: "DPR: dot product, in-batch negatives plus any hard negatives",
    columns: "anchor,positive,negative?",
    more_texts: true,
    per_example: false,
    ranking: Some(RANKING),
    build: |_| Ok(Box::new(Contrastive)),
    ..LossSpec::BASE
};

/// The dot product, unscaled, nothing excluded.
const RANKING: Ranking = Ranking {
    scale: 1.0,
    cosine: false,
    exclude_shared: false,
};

struct Contrastive;

impl Loss for Contrastive {
    fn forward(&self, emb: &[Tensor], _: Option<&Tensor>) -> Result<Tensor> {
        RANKING.forward(emb, None)
    }
}
