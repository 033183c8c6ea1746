//! A bi-encoder task's GPU engine and the memory its steps reuse (gpu_step.rs runs them).
use crate::error::Result;
use crate::model::engine::gpu::{Buf, Device, EmbedHead, Grads, RankingRoom, Stack};
use crate::model::Bert;

/// A task's GPU engine: the stack, the gradient arena it accumulates into, and the device's
/// head and loss with their memory (made at the first step that needs them, then reused).
pub struct GpuTask<D: Device> {
    pub stack: Stack<D>,
    pub grads: Grads<D>,
    pub(super) head: Option<EmbedHead<D>>,
    pub(super) ranking: Option<RankingRoom<D>>,
    pub(super) cache: Option<WholeBatch<D>>,
}

/// GradCache's whole-batch embeddings and their gradient, `len` elements each.
pub(super) struct WholeBatch<D: Device> {
    pub(super) len: usize,
    pub(super) emb: Buf<D, f32>,
    pub(super) grad: Buf<D, f32>,
}

impl<D: Device> GpuTask<D> {
    /// The engine for `bert` on `dev`, its gradients' arena on `on` (candle's handle on `dev`).
    pub fn new(dev: D, bert: &Bert, on: &candle_core::Device) -> Result<GpuTask<D>> {
        let stack = Stack::new(dev, bert)?;
        let grads = stack.zero_grads(on)?;
        Ok(GpuTask {
            stack,
            grads,
            head: None,
            ranking: None,
            cache: None,
        })
    }
}
