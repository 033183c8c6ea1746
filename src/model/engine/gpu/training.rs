//! A model's GPU engine for training, made at a task's first step and kept in the task: the
//! stack, the gradient arena it accumulates into, and the device's head, ranking loss and
//! GradCache memory, each made at the first step that needs it and reused after. One holder
//! for the bi-encoder and the cross-encoder (a cross-encoder's head pools [CLS], unnormalised).
use super::device::{Addr, Buf, Device};
use super::grads::Grads;
use super::heads::{DevicePooling, EmbedHead};
use super::ranking::RankingRoom;
use super::stack::Stack;
use super::Cuda;
use crate::model::{Bert, Dropout};
use candle_core::cuda::CudaDevice;
use candle_core::Result;

pub struct Training<D: Device> {
    pub stack: Stack<D>,
    pub grads: Grads<D>,
    pub head: Option<EmbedHead<D>>,
    pub ranking: Option<RankingRoom<D>>,
    pub cache: Option<WholeBatch<D>>,
}

/// GradCache's whole-batch embeddings and their gradient, `len` elements each.
pub struct WholeBatch<D: Device> {
    pub len: usize,
    pub emb: Buf<D, f32>,
    pub grad: Buf<D, f32>,
}

impl<D: Device> Training<D> {
    /// The engine for `bert` on `dev`, its gradients' arena on `on` (candle's handle on `dev`).
    pub fn new(dev: D, bert: &Bert, on: &candle_core::Device) -> Result<Training<D>> {
        let stack = Stack::new(dev, bert)?;
        let grads = stack.zero_grads(on)?;
        Ok(Training {
            stack,
            grads,
            head: None,
            ranking: None,
            cache: None,
        })
    }

    /// The sequences (`types` their token types, `keys` their dropout names) through the stack
    /// and the head pooling `pooling` (made at the first call): the embeddings' address, valid
    /// until the next forward, and the head's width (`ids.len()` rows of it).
    #[allow(clippy::too_many_arguments)]
    pub fn embed_pooled(
        &mut self,
        bert: &Bert,
        ids: &[&[u32]],
        types: Option<&[&[u32]]>,
        keys: &[u64],
        drop: Option<&Dropout>,
        pooling: DevicePooling,
        normalize: bool,
    ) -> Result<(Addr, usize)> {
        self.stack.forward(bert, ids, types, Some(keys), drop)?;
        let hidden = bert.config.hidden_size;
        let head = self
            .head
            .get_or_insert_with(|| EmbedHead::new(pooling, normalize, hidden));
        Ok((head.forward(&self.stack)?, head.width))
    }
}

impl Training<Cuda> {
    /// The engine kept in `slot`, made there on `gpu` for `bert` at the first call.
    pub fn kept<'s>(
        slot: &'s mut Option<Training<Cuda>>,
        gpu: &CudaDevice,
        bert: &Bert,
    ) -> Result<&'s mut Training<Cuda>> {
        if slot.is_none() {
            let on = candle_core::Device::Cuda(gpu.clone());
            *slot = Some(Training::new(Cuda::new(gpu)?, bert, &on)?);
        }
        Ok(slot.as_mut().expect("made above"))
    }
}
