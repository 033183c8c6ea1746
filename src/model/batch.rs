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
