//! A cross-encoder step on the GPU engine (model/engine/gpu; issue 57, item 2's cross-encoder
//! step): the pairs packed into one forward with their token types, each keyed by example as
//! the CPU engine keys it (so the dropout masks are the CPU engine's), `[CLS]` taken on the
//! device into a leaf of b rows (no padded batch), the pooler, classifier and loss in candle
//! (a few ops on b x h), one backward into the engine's arena. A child of cross_encoder.rs.
use super::CrossEncoderTask;
use crate::error::Result;
use crate::model::engine::gpu::{Device, DevicePooling, EmbedHead, Grads, PooledLeaf, Stack};
use crate::model::{Bert, Dropout, Pooling};
use crate::train::grads::ParamGrads;
use crate::train::params;
use crate::train::task::Gradients;

/// A cross-encoder's GPU engine: the stack, its gradient arena, and the `[CLS]` head's memory.
pub struct CrossGpu<D: Device> {
    pub stack: Stack<D>,
    pub grads: Grads<D>,
    head: EmbedHead<D>,
}

impl<D: Device> CrossGpu<D> {
    /// The engine for `bert` on `dev`, its arena on `on` (candle's handle on `dev`).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub fn new(dev: D, bert: &Bert, on: &candle_core::Device) -> Result<CrossGpu<D>> {
        let stack = Stack::new(dev, bert)?;
        let grads = stack.zero_grads(on)?;
        let cls = DevicePooling::of(Pooling::CLS).expect("the device pools [CLS]");
        let hidden = bert.embeddings.word.embeddings().dim(1)?;
        Ok(CrossGpu {
            stack,
            grads,
            head: EmbedHead::new(cls, false, hidden),
        })
    }
}

impl CrossEncoderTask {
    /// `gradients` on the model's GPU, the engine made at the first call and kept.
    #[cfg(feature = "cuda")]
    pub(super) fn on_gpu(
        &self,
        gpu: &candle_core::cuda::CudaDevice,
        idx: &[usize],
        drop: Option<&Dropout>,
        weight: f64,
    ) -> Result<Gradients> {
        use crate::model::engine::gpu::Cuda;
        let mut slot = self.gpu.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_none() {
            let on = candle_core::Device::Cuda(gpu.clone());
            *slot = Some(CrossGpu::new(Cuda::new(gpu)?, &self.model.bert, &on)?);
        }
        self.gpu_gradients(slot.as_mut().expect("made above"), idx, drop, weight)
    }

    /// Before a dev evaluation: the engine's workspace freed (the evaluation's stack for
    /// inference makes its own; the next step allocates it again), so that the GPU's peak is
    /// the larger of the two, not their sum.
    pub(super) fn release_gpu(&self) {
        #[cfg(feature = "cuda")]
        if let Some(gpu) = self.gpu.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            gpu.stack.release();
        }
    }

    /// The step's loss and gradients for rows `idx` on `GPU` (its arena restarted first),
    /// `weight` x the batch's mean loss; the backbone's gradients are views of the arena, held
    /// by the result's lease.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(super) fn gpu_gradients<D: Device>(
        &self,
        gpu: &mut CrossGpu<D>,
        idx: &[usize],
        drop: Option<&Dropout>,
        weight: f64,
    ) -> Result<Gradients> {
        let bert = &self.model.bert;
        gpu.grads.restart(gpu.stack.device())?;
        let (ids, types, keys) = self.packed(idx);
        gpu.stack
            .forward(bert, &ids, Some(&types), Some(&keys), drop)?;
        let leaf = PooledLeaf::forward(&gpu.stack, &mut gpu.head, &self.device)?;
        let (mut out, store) = self.head_step(leaf.emb.as_tensor(), idx, &keys, drop, weight)?;
        leaf.backward(&mut gpu.stack, &gpu.head, (bert, &store), drop, &gpu.grads)?;
        let mut grads = ParamGrads::from_store(&params::var_list(&self.varmap), store);
        let (pairs, lease) = gpu.grads.export(bert)?;
        grads.add_pairs(pairs)?;
        grads.hold(lease);
        out.grads = grads;
        Ok(out)
    }
}

#[cfg(test)]
#[path = "cross_encoder_gpu_test.rs"]
mod tests;
