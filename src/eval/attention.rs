//! The Condenser paper's attention analysis: how broadly the [CLS] token attends, per layer, as the
//! entropy of its attention distribution over the tokens, averaged over heads and sentences.
use crate::error::{Error, Result};
use crate::model::{SentenceEncoder, TokenBatch};
use candle_core::{DType, D};
use indicatif::ProgressBar;

/// [CLS] attention entropies over a set of texts.
pub struct ClsEntropy {
    /// Mean entropy (nats) of [CLS]'s attention in each layer.
    pub layers: Vec<f64>,
    /// The ceiling: the mean entropy of uniform attention over each text's tokens.
    pub uniform: f64,
}

pub fn cls_attention_entropy(
    enc: &SentenceEncoder,
    texts: &[String],
    batch_size: usize,
    progress: &ProgressBar,
) -> Result<ClsEntropy> {
    let mut seqs = texts
        .iter()
        .map(|t| enc.token_ids(t))
        .collect::<Result<Vec<_>>>()?;
    // length-sorted batches pad little; padded keys get zero attention and add no entropy
    seqs.sort_by_key(|s| s.len());
    let layers = enc.bert.layers.len();
    let mut sums = vec![0f64; layers];
    let mut count = 0usize;
    let err = |e: candle_core::Error| Error::context("model forward", e);
    for chunk in seqs.chunks(batch_size.max(1)) {
        let refs: Vec<&[u32]> = chunk.iter().map(|s| s.as_slice()).collect();
        let b = TokenBatch::new(&refs, None, enc.special.pad, &enc.device).map_err(err)?;
        let (_, probs) = enc
            .bert
            .forward_all(&b.ids, &b.type_ids, &b.mask)
            .map_err(err)?;
        for (l, p) in probs.iter().enumerate() {
            // (b, heads, query, key): the [CLS] query's row
            let cls = p
                .narrow(2, 0, 1)
                .and_then(|c| c.to_dtype(DType::F64))
                .map_err(err)?;
            let h = (&cls * (&cls + 1e-30).and_then(|c| c.log()).map_err(err)?)
                .and_then(|t| t.sum(D::Minus1)?.sum_all()?.to_scalar::<f64>())
                .map_err(err)?;
            sums[l] -= h;
        }
        count += chunk.len() * enc.bert.config.num_attention_heads;
        progress.inc(chunk.len() as u64);
    }
    let uniform =
        seqs.iter().map(|s| (s.len() as f64).ln()).sum::<f64>() / seqs.len().max(1) as f64;
    Ok(ClsEntropy {
        layers: sums.into_iter().map(|s| s / count.max(1) as f64).collect(),
        uniform,
    })
}
