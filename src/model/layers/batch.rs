use candle_core::{Device, Result, Tensor};

/// Padded model input: ids, token types and the 0/1 attention mask, each (b, longest).
pub struct TokenBatch {
    pub ids: Tensor,
    pub type_ids: Tensor,
    pub mask: Tensor,
}

impl TokenBatch {
    /// Right-pad sequences (with their token types, or all type 0) to the longest in the batch.
    pub fn new(
        seqs: &[&[u32]],
        types: Option<&[&[u32]]>,
        pad_id: u32,
        device: &Device,
    ) -> Result<TokenBatch> {
        let b = seqs.len();
        let len = seqs.iter().map(|s| s.len()).max().unwrap_or(0).max(1);
        let mut ids = vec![pad_id; b * len];
        let mut tt = vec![0u32; b * len];
        let mut mask = vec![0u32; b * len];
        for (i, s) in seqs.iter().enumerate() {
            ids[i * len..i * len + s.len()].copy_from_slice(s);
            mask[i * len..i * len + s.len()].fill(1);
            if let Some(t) = types {
                tt[i * len..i * len + s.len()].copy_from_slice(t[i]);
            }
        }
        Ok(TokenBatch {
            ids: Tensor::from_vec(ids, (b, len), device)?,
            type_ids: Tensor::from_vec(tt, (b, len), device)?,
            mask: Tensor::from_vec(mask, (b, len), device)?,
        })
    }
}

/// Run `f` over items in batches of `size`, longest first so that a batch carries little
/// padding, and return its per-item results in input order. `lens[i]` is item i's token count;
/// `f` gets a batch's item indices and returns one result per index, in that order.
pub fn by_length<R>(
    lens: &[usize],
    size: usize,
    progress: &indicatif::ProgressBar,
    mut f: impl FnMut(&[usize]) -> crate::Result<Vec<R>>,
) -> crate::Result<Vec<R>> {
    let mut order: Vec<usize> = (0..lens.len()).collect();
    // stable: equal lengths keep input order, so results do not depend on the sort's whims
    order.sort_by_key(|&i| std::cmp::Reverse(lens[i]));
    let mut out: Vec<Option<R>> = (0..lens.len()).map(|_| None).collect();
    for chunk in order.chunks(size.max(1)) {
        crate::runtime::cancel::check()?;
        let rows = f(chunk)?;
        assert_eq!(rows.len(), chunk.len(), "one result per item");
        for (&i, r) in chunk.iter().zip(rows) {
            out[i] = Some(r);
        }
        progress.inc(chunk.len() as u64);
    }
    Ok(out
        .into_iter()
        .map(|r| r.expect("every item batched"))
        .collect())
}
