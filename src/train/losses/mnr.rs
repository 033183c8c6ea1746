//! MultipleNegativesRankingLoss: anchor i's positive is candidate i; every other anchor's positive
//! and every hard negative is a negative. Cross-entropy over 20 x cosine similarity.
use super::{Loss, LossSpec, Ranking};
use candle_core::{Result, Tensor};

pub const SPEC: LossSpec = LossSpec {
    name: "mnr",
    help: "MultipleNegativesRankingLoss: 20 x cosine, in-batch negatives plus any hard negatives",
    columns: "anchor,positive,negative?",
    more_texts: true,
    per_example: false,
    ranking: Some(RANKING),
    build: |_| Ok(Box::new(Mnr)),
    ..LossSpec::BASE
};

/// 20 x cosine similarity, nothing excluded.
pub const RANKING: Ranking = Ranking {
    scale: 20.0,
    cosine: true,
    exclude_shared: false,
};

pub struct Mnr;

impl Loss for Mnr {
    fn forward(&self, emb: &[Tensor], _: Option<&Tensor>) -> Result<Tensor> {
        RANKING.forward(emb, None)
    }
}
