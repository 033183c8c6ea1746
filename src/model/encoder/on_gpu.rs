//! Encoding (and a cross-encoder's scoring, cross.rs) on a GPU through the GPU engine
//! (model/engine/gpu): each length-sorted batch packed into one forward of a stack for
//! inference (no padding, no tape; about 90 launches a batch for MiniLM in f32, 140 in bf16,
//! and no allocation after the first batch, the longest, where candle's graph makes hundreds of
//! each), pooled and normalised on the device (heads.cu), only the pooled rows copied back. A
//! GPU's encode was bound by the host's calls, not by the products (docs/gpu.md): this cuts
//! the calls.
use super::SentenceEncoder;
use crate::error::{Context, Result};
use crate::model::engine::gpu::{Device, DevicePooling, EmbedHead, Stack};
use crate::model::layers::batch::by_length;
use crate::model::Bert;
use indicatif::ProgressBar;

impl SentenceEncoder {
    /// The GPU and the device's pooling where the GPU engine runs this encoder (`backend`).
    fn gpu_route(&self) -> Option<(candle_core::cuda::CudaDevice, DevicePooling)> {
        let gpu = self.backend().gpu()?.clone();
        Some((gpu, DevicePooling::of(self.pooling)?))
    }

    /// On a GPU, the embeddings of `seqs` from the GPU engine where it takes this encoder
    /// (`backend`); None: candle's graph encodes them (a build without CUDA has no GPU).
    pub(super) fn on_gpu(
        &self,
        seqs: &[Vec<u32>],
        batch_size: usize,
        progress: &ProgressBar,
    ) -> Option<Result<Vec<Vec<f32>>>> {
        let (gpu, pooling) = self.gpu_route()?;
        Some(
            crate::model::engine::gpu::Cuda::new(&gpu)
                .doing("the GPU engine")
                .and_then(|dev| encode(self, dev, pooling, seqs, batch_size, progress)),
        )
    }
}

/// The embeddings (one row an item, input order) of `seqs` encoded on `dev` in batches of
/// `batch_size` sequences, longest first (as candle's route batches them), pooled as `pooling`.
pub(super) fn encode<D: Device>(
    enc: &SentenceEncoder,
    dev: D,
    pooling: DevicePooling,
    seqs: &[Vec<u32>],
    batch_size: usize,
    progress: &ProgressBar,
) -> Result<Vec<Vec<f32>>> {
    let ids: Vec<&[u32]> = seqs.iter().map(Vec::as_slice).collect();
    let head = (pooling, enc.normalize);
    on_engine(
        &enc.bert,
        dev,
        head,
        (&ids, None),
        (batch_size, progress),
        |flat, w| Ok(flat.chunks_exact(w).map(<[f32]>::to_vec).collect()),
    )
}

/// `bert` on `dev`'s GPU engine (a stack for inference) over `ids` (with token `types` where
/// given), in length-sorted batches of `batch_size` sequences, longest first: each batch's rows
/// pooled (and normalised) on the device as `head` says, copied back (items x width, flat) and
/// handed to `finish` with the width, which makes one output an item; outputs in input order.
/// The sentence encoder's and the cross-encoder's (cross.rs) route on a GPU.
pub(super) fn on_engine<D: Device, R>(
    bert: &Bert,
    dev: D,
    (pooling, normalize): (DevicePooling, bool),
    (ids, types): (&[&[u32]], Option<&[&[u32]]>),
    (batch_size, progress): (usize, &ProgressBar),
    mut finish: impl FnMut(Vec<f32>, usize) -> Result<Vec<R>>,
) -> Result<Vec<R>> {
    let mut stack = Stack::for_inference(dev, bert).doing("the GPU engine")?;
    let mut head = EmbedHead::new(pooling, normalize, bert.config.hidden_size);
    let lens: Vec<usize> = ids.iter().map(|s| s.len()).collect();
    by_length(&lens, batch_size, progress, |chunk| {
        let batch: Vec<&[u32]> = chunk.iter().map(|&i| ids[i]).collect();
        let batch_types: Option<Vec<&[u32]>> = types.map(|t| chunk.iter().map(|&i| t[i]).collect());
        let at = stack
            .forward(bert, &batch, batch_types.as_deref(), None, None)
            .and_then(|_| head.forward(&stack))
            .doing("model forward")?;
        let w = head.width;
        let mut flat = vec![0f32; batch.len() * w];
        stack
            .device()
            .download(at, bytemuck::cast_slice_mut(&mut flat))
            .doing("the rows from the GPU")?;
        finish(flat, w)
    })
}

#[cfg(test)]
#[path = "on_gpu_test.rs"]
mod tests;
