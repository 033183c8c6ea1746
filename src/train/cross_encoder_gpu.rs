//! A cross-encoder step on the GPU engine (model/engine/gpu; issue 57, item 2's cross-encoder
//! step): the pairs packed into one forward with their token types, each keyed by example as
//! the CPU engine keys it (so the dropout masks are the CPU engine's), `[CLS]` taken on the
//! device into a leaf of b rows (no padded batch), the pooler, classifier and loss in candle
//! (a few ops on b x h), one backward into the engine's arena. A child of cross_encoder.rs.
use super::CrossEncoderTask;
use crate::error::Result;
use crate::model::engine::gpu::{Cuda, Device, DevicePooling, PooledLeaf, Training};
use crate::model::{Dropout, Pooling};
use crate::train::backbone::Backbone;
use crate::train::grads::ParamGrads;
use crate::train::task::Gradients;
use candle_core::backprop::GradStore;
use candle_core::Tensor;
use std::sync::Mutex;

impl CrossEncoderTask {
    /// `gradients` on the model's GPU, the engine made at the first call and kept.
    pub(super) fn on_gpu(
        &self,
        gpu: &candle_core::cuda::CudaDevice,
        idx: &[usize],
        drop: Option<&Dropout>,
        weight: f64,
    ) -> Result<Gradients> {
        let mut slot = self.gpu.lock().unwrap_or_else(|e| e.into_inner());
        let engine = Training::<Cuda>::kept(&mut slot, gpu, &self.model.bert)?;
        self.gpu_gradients(engine, idx, drop, weight)
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
        gpu: &mut Training<D>,
        idx: &[usize],
        drop: Option<&Dropout>,
        weight: f64,
    ) -> Result<Gradients>
    where
        Training<D>: Send,
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
    gpu: Mutex<&'a mut Training<D>>,
    drop: Option<&'a Dropout>,
}

impl<D: Device> Backbone for OnGpu<'_, D>
where
    Training<D>: Send,
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
        let (ids, types, keys) = self.task.packed(rows);
        let (bert, types) = (&self.task.model.bert, Some(&types[..]));
        let cls = DevicePooling::of(Pooling::CLS).expect("the device pools [CLS]");
        let (at, width) = gpu.embed_pooled(bert, &ids, types, &keys, self.drop, cls, false)?;
        let leaf = PooledLeaf::of(
            gpu.stack.device(),
            at,
            (ids.len(), width),
            &self.task.device,
        )?;
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
            gpu.head.as_ref().expect("made by embed"),
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
