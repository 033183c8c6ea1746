//! Encoding on a card through the GPU engine (model/engine/gpu): each length-sorted batch packed
//! into one forward of a stack for inference (no padding, no tape; about 90 launches a batch
//! for MiniLM in f32, 140 in bf16, and no allocation after the first batch, the longest, where
//! candle's graph makes hundreds of each), pooled and normalised on the device (heads.cu), only
//! the embeddings copied back. A card's encode was bound by the host's calls, not by the
//! products (docs/gpu.md): this cuts the calls.
use super::SentenceEncoder;
use crate::error::{Context, Result};
use crate::model::engine::gpu::device::Device;
use crate::model::engine::gpu::heads::{DevicePooling, EmbedHead};
use crate::model::engine::gpu::stack::Stack;
use crate::model::layers::batch::by_length;
use indicatif::ProgressBar;

impl SentenceEncoder {
    /// Whether `on_card` runs this encoder on the GPU engine: its model on a card the engine
    /// takes (`card_for`: f32 weights, BERT's GELU, heads of width 32 or 64) and a pooling the
    /// device runs (not max).
    pub fn on_card_takes(&self) -> bool {
        #[cfg(feature = "cuda")]
        return crate::model::engine::gpu::cuda::card_for(&self.bert).is_some()
            && DevicePooling::of(self.pooling).is_some();
        #[cfg(not(feature = "cuda"))]
        false
    }

    /// On a card, the embeddings of `seqs` from the GPU engine where it takes this encoder
    /// (`on_card_takes`); None: candle's graph encodes them.
    #[cfg(feature = "cuda")]
    pub(super) fn on_card(
        &self,
        seqs: &[Vec<u32>],
        batch_size: usize,
        progress: &ProgressBar,
    ) -> Option<Result<Vec<Vec<f32>>>> {
        let card = crate::model::engine::gpu::cuda::card_for(&self.bert)?;
        let pooling = DevicePooling::of(self.pooling)?;
        Some(
            crate::model::engine::gpu::cuda::Cuda::new(&card)
                .doing("the GPU engine")
                .and_then(|dev| encode(self, dev, pooling, seqs, batch_size, progress)),
        )
    }

    /// Without the `cuda` feature there is no card.
    #[cfg(not(feature = "cuda"))]
    pub(super) fn on_card(
        &self,
        _: &[Vec<u32>],
        _: usize,
        _: &ProgressBar,
    ) -> Option<Result<Vec<Vec<f32>>>> {
        None
    }
}

/// The embeddings (one row an item, input order) of `seqs` encoded on `dev` in batches of
/// `batch_size` sequences, longest first (as candle's route batches them), pooled as `pooling`.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(super) fn encode<D: Device>(
    enc: &SentenceEncoder,
    dev: D,
    pooling: DevicePooling,
    seqs: &[Vec<u32>],
    batch_size: usize,
    progress: &ProgressBar,
) -> Result<Vec<Vec<f32>>> {
    let mut stack = Stack::for_inference(dev, &enc.bert).doing("the GPU engine")?;
    let mut head = EmbedHead::new(pooling, enc.normalize, enc.bert.config.hidden_size);
    let lens: Vec<usize> = seqs.iter().map(Vec::len).collect();
    by_length(&lens, batch_size, progress, |chunk| {
        let batch: Vec<&[u32]> = chunk.iter().map(|&i| seqs[i].as_slice()).collect();
        let at = stack
            .forward(&enc.bert, &batch, None, None, None)
            .and_then(|_| head.forward(&stack))
            .doing("model forward")?;
        let w = head.width;
        let mut flat = vec![0f32; batch.len() * w];
        stack
            .device()
            .download(at, bytemuck::cast_slice_mut(&mut flat))
            .doing("the embeddings from the card")?;
        Ok(flat.chunks_exact(w).map(<[f32]>::to_vec).collect())
    })
}

#[cfg(test)]
#[path = "on_card_test.rs"]
mod tests;
