//! MultipleNegativesRankingLoss without in-batch false negatives: when two rows of a batch share
//! their anchor (one query with two relevant documents) or their positive, each row's positive is
//! taken out of the other's softmax instead of serving as its negative. Retrieval labels repeat a
//! query over its relevant documents (CACM's train queries hold about 15 each), and a batch larger
//! than the distinct queries cannot keep them apart; the no-duplicates arrangement still tries
//! first. Hard negatives are never masked. Not in sentence-transformers (its MNR keeps them).
use super::{required, Loss, LossSpec, Ranking, Target};
use candle_core::{Result, Tensor};

pub const SPEC: LossSpec = LossSpec {
    name: "mnr-masked",
    help: "MNR with another row's positive left out of a row's negatives when the two rows share their anchor or positive text",
    columns: "anchor,positive,negative?",
    more_texts: true,
    per_example: false,
    target: Target::TextIds,
    ranking: Some(RANKING),
    build: |_| Ok(Box::new(MnrMasked)),
    ..LossSpec::BASE
};

/// MNR's, with the shared texts excluded.
const RANKING: Ranking = Ranking {
    exclude_shared: true,
    ..super::mnr::RANKING
};

struct MnrMasked;

impl Loss for MnrMasked {
    fn forward(&self, emb: &[Tensor], target: Option<&Tensor>) -> Result<Tensor> {
        let ids = required(target, &SPEC)?;
        let candidates: usize = emb[1..].iter().map(|e| e.dim(0)).sum::<Result<usize>>()?;
        RANKING.forward(emb, Some(&false_negatives(ids, candidates)?))
    }
}

/// The additive mask (b, c) of rows' text ids (b, 2): -1e9 at (i, j) for another row j < b with
/// row i's anchor or positive, 0 elsewhere (the diagonal and the hard negatives j >= b).
pub fn false_negatives(ids: &Tensor, c: usize) -> Result<Tensor> {
    let device = ids.device().clone();
    let ids: Vec<Vec<u32>> = ids.to_vec2()?;
    let b = ids.len();
    let mut m = vec![0f32; b * c];
    for i in 0..b {
        for j in (0..b).filter(|&j| j != i) {
            if ids[j][0] == ids[i][0] || ids[j][1] == ids[i][1] {
                m[i * c + j] = -1e9;
            }
        }
    }
    Tensor::from_vec(m, (b, c), &device)
}
