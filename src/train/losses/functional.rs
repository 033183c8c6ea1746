//! The loss functions the losses and tasks are built from, each from differentiable ops
//! (gradient-checked in tests/gradcheck.rs).
use crate::model::l2_normalize;
use candle_core::{Result, Tensor, D};

/// Binary cross-entropy with logits, mean over elements, in the numerically stable form
/// max(x, 0) - x y + log(1 + exp(-|x|)) (torch's BCEWithLogitsLoss).
pub fn bce_with_logits(logits: &Tensor, targets: &Tensor) -> Result<Tensor> {
    let softplus = (logits.abs()?.neg()?.exp()? + 1.0)?.log()?;
    (logits.relu()? - (logits * targets)?)?
        .add(&softplus)?
        .mean_all()
}

/// Cross-entropy of logits (b, c) against class ids (b,), mean over the batch: one fused op on
/// CPU f32 (an MLM's logits are positions x vocabulary, the largest tensors of a step), composed
/// from differentiable ops elsewhere.
pub fn cross_entropy(logits: &Tensor, classes: &Tensor) -> Result<Tensor> {
    if super::cross_entropy::usable(logits, classes) {
        return super::cross_entropy::fused(logits, classes);
    }
    cross_entropy_composed(logits, classes)
}

/// The composed form (and the reference the fused op is tested against).
pub fn cross_entropy_composed(logits: &Tensor, classes: &Tensor) -> Result<Tensor> {
    let max = logits.max_keepdim(D::Minus1)?;
    let shifted = logits.broadcast_sub(&max)?;
    let log_probs = shifted.broadcast_sub(&shifted.exp()?.sum_keepdim(D::Minus1)?.log()?)?;
    log_probs
        .gather(&classes.unsqueeze(1)?, 1)?
        .neg()?
        .mean_all()
}

/// Mean squared error over all elements (torch's MSELoss).
pub fn mse(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    (a - b)?.sqr()?.mean_all()
}

/// Row-wise cosine similarity of (b, d) embeddings, (b,): sentence-transformers' cos_sim diagonal.
pub fn pair_cosine(u: &Tensor, v: &Tensor) -> Result<Tensor> {
    (l2_normalize(u)? * l2_normalize(v)?)?.sum(1)
}

/// CosineSimilarityLoss: MSE between cos(u, v) and a [0, 1] label (AugSBERT's bi-encoder loss).
pub fn cosine_mse(u: &Tensor, v: &Tensor, labels: &Tensor) -> Result<Tensor> {
    mse(&pair_cosine(u, v)?, labels)
}

/// In-batch ranking: anchor i's positive is candidate i; every other candidate (other anchors'
/// positives, then any hard negatives) is a negative. Cross-entropy over scale x similarity:
/// cosine with scale 20 is MultipleNegativesRankingLoss, dot product with scale 1 is DPR's loss.
/// `exclude`, (b, candidates), is added to the scores: -1e9 takes a candidate out of anchor i's
/// softmax (a false negative), 0 keeps it.
pub fn in_batch_ranking(
    anchors: &Tensor,
    candidates: &Tensor,
    scale: f64,
    cosine: bool,
    exclude: Option<&Tensor>,
) -> Result<Tensor> {
    let (a, c) = if cosine {
        (l2_normalize(anchors)?, l2_normalize(candidates)?)
    } else {
        (anchors.clone(), candidates.clone())
    };
    let scores = (a.matmul(&c.t()?)? * scale)?;
    let scores = match exclude {
        Some(m) => (scores + m.to_dtype(a.dtype())?)?,
        None => scores,
    };
    let b = anchors.dim(0)?;
    let target = Tensor::arange(0u32, b as u32, anchors.device())?;
    cross_entropy(&scores, &target)
}

/// MarginMSE: the student's dot(q, p) - dot(q, n) per row against the teacher's margins, MSE.
pub fn margin_mse(q: &Tensor, p: &Tensor, n: &Tensor, teacher: &Tensor) -> Result<Tensor> {
    mse(&(q * (p - n)?)?.sum(1)?, teacher)
}

/// TripletLoss with euclidean distance: relu(|a - p| - |a - n| + margin), mean; distances as
/// torch's pairwise_distance (eps 1e-6 added to the difference, so equal vectors keep a gradient).
pub fn triplet(a: &Tensor, p: &Tensor, n: &Tensor, margin: f64) -> Result<Tensor> {
    let dist =
        |x: &Tensor, y: &Tensor| -> Result<Tensor> { ((x - y)? + 1e-6)?.sqr()?.sum(1)?.sqrt() };
    ((dist(a, p)? - dist(a, n)?)? + margin)?.relu()?.mean_all()
}

/// coCondenser's corpus-aware contrastive loss over span vectors in rows [a1, b1, a2, b2, ...]:
/// each span's positive is the other span of its document and every other span in the batch is a
/// negative; dot products, the span itself excluded (its score pushed to -1e9).
pub fn span_contrastive(cls: &Tensor) -> Result<Tensor> {
    let n = cls.dim(0)?;
    let dev = cls.device();
    let diag: Vec<f32> = (0..n * n)
        .map(|k| if k / n == k % n { -1e9 } else { 0.0 })
        .collect();
    let diag = Tensor::from_vec(diag, (n, n), dev)?.to_dtype(cls.dtype())?;
    let scores = (cls.matmul(&cls.t()?)? + diag)?;
    let target = Tensor::from_vec((0..n as u32).map(|i| i ^ 1).collect::<Vec<_>>(), n, dev)?;
    cross_entropy(&scores, &target)
}
