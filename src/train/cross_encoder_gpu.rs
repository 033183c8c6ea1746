//! A cross-encoder step on the GPU engine (model/engine/gpu; issue 57, item 2's cross-encoder
//! step): the pairs packed into one forward with their token types, each keyed by example as
//! the CPU engine keys it (so the dropout masks are the CPU engine's), `[CLS]` taken on the
//! device into a leaf of b rows (no padded batch), the pooler, classifier and loss in candle
//! (a few ops on b x h), one backward into the engine's arena. A child of cross_encoder.rs.
use super::CrossEncoderTask;
use crate::error::Result;
use crate::model::engine::gpu::{Device, DevicePooling, EmbedHead, Grads, PooledLeaf, Stack};
use crate::model::{Bert, Dropout, Pooling};
use crate::train::backbone::Backbone;
use crate::train::grads::ParamGrads;
use crate::train::task::Gradients;
use candle_core::backprop::GradStore;
use candle_core::Tensor;
use std::sync::Mutex;

/// A cross-encoder's GPU engine: the stack, its gradient arena, and the `[CLS]` head's memory.
pub struct CrossGpu<D: Device> {
    pub stack: Stack<D>,
    pub grads: Grads<D>,
    head: EmbedHead<D>,
}

impl<D: Device> CrossGpu<D> {
    /// The engine for `bert` on `dev`, its arena on `on` (candle's handle on `dev`).
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
        if let Some(gpu) = self.gpu.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            gpu.stack.release();
        }
    }

    /// The step (`step`) for rows `idx` on `gpu`, its arena restarted first, `weight` x the
    /// batch's mean loss; the backbone's gradients are views of the arena, held by the result's
    /// lease.
    pub(super) fn gpu_gradients<D: Device>(
        &self,
        gpu: &mut CrossGpu<D>,
        idx: &[usize],
        drop: Option<&Dropout>,
        weight: f64,
    ) -> Result<Gradients>
    where
        CrossGpu<D>: Send,
    {
        gpu.grads.restart(gpu.stack.device())?;
        let on_gpu = OnGpu {
            task: self,
            gpu: Mutex::new(gpu),
            drop,
        };
        self.step(&on_gpu, idx, drop, weight)
    }
}

/// The GPU engine as a cross-encoder's backbone: the pairs packed into one forward with their
/// token types, `[CLS]` taken on the device into a leaf of b rows; one thread (one stream).
struct OnGpu<'a, D: Device> {
    task: &'a CrossEncoderTask,
    gpu: Mutex<&'a mut CrossGpu<D>>,
    drop: Option<&'a Dropout>,
}

impl<D: Device> Backbone for OnGpu<'_, D>
where
    CrossGpu<D>: Send,
{
    type Tape = PooledLeaf;
    type Grads = ();

    fn embed(
        &self,
        rows: &[usize],
        _: Option<usize>,
        tape: bool,
    ) -> Result<(Vec<Tensor>, Option<PooledLeaf>)> {
        let mut gpu = self.gpu.lock().unwrap_or_else(|e| e.into_inner());
        let gpu = &mut **gpu;
        let (bert, (ids, types, keys)) = (&self.task.model.bert, self.task.packed(rows));
        gpu.stack
            .forward(bert, &ids, Some(&types), Some(&keys), self.drop)?;
        let leaf = PooledLeaf::forward(&gpu.stack, &mut gpu.head, &self.task.device)?;
        Ok((vec![leaf.emb.as_tensor().clone()], tape.then_some(leaf)))
    }

    fn zero_grads(&self) -> Result<()> {
        Ok(())
    }

    fn backward(&self, leaf: PooledLeaf, store: &GradStore, _: &mut ()) -> Result<()> {
        let mut gpu = self.gpu.lock().unwrap_or_else(|e| e.into_inner());
        let gpu = &mut **gpu;
        let bert = &self.task.model.bert;
        leaf.backward(
            &mut gpu.stack,
            &gpu.head,
            (bert, store),
            self.drop,
            &gpu.grads,
        )?;
        Ok(())
    }

    /// BERT's gradients as views of the GPU's arena (held by the result's lease).
    fn export(&self, _: ()) -> Result<ParamGrads> {
        let gpu = self.gpu.lock().unwrap_or_else(|e| e.into_inner());
        Ok(ParamGrads::of_arena(
            gpu.grads.export(&self.task.model.bert)?,
        ))
    }
}

#[cfg(test)]
#[path = "cross_encoder_gpu_test.rs"]
mod tests;
