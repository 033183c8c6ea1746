//! MultipleNegativesRankingLoss: anchor i's positive is candidate i; every other anchor's positive
//! and every hard negative is a negative. Cross-entropy over 20 x cosine similarity.
use super::{in_batch_ranking, Loss, LossSpec, Ranking};
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
        let r = RANKING;
        in_batch_ranking(
            &emb[0],
            &Tensor::cat(&emb[1..], 0)?,
            r.scale,
            r.cosine,
            None,
        )
    }
}
