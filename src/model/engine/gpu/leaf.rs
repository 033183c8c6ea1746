//! Where the GPU engine meets candle, as ../leaf.rs for the CPU engine: a forward whose last
//! layer's states enter candle's graph as a leaf (padded (b, len, h) on the model's device, with
//! the 0/1 mask the heads pool by), so that a head and a loss run as candle ops; after candle's
//! backward, the leaf's gradient goes back through the engine (packed again on the device).
use super::device::Device;
use super::grads::Grads;
use super::stack::Stack;
use crate::model::{Bert, Dropout};
use candle_core::backprop::GradStore;
use candle_core::{Result, Tensor, Var};

pub struct GpuLeaf {
    /// (b, len, h): the states of real tokens, zeros where padded.
    pub states: Var,
    /// (b, len) 0/1: 1 for real tokens.
    pub mask: Tensor,
}

impl GpuLeaf {
    /// Run `stack` forward on the sequences (named by `keys` for dropout), keeping its tape;
    /// the leaf lives on `on` (candle's handle on the stack's device).
    pub fn forward<D: Device>(
        stack: &mut Stack<D>,
        bert: &Bert,
        ids: &[&[u32]],
        types: Option<&[&[u32]]>,
        keys: &[u64],
        drop: Option<&Dropout>,
        on: &candle_core::Device,
    ) -> Result<GpuLeaf> {
        let hidden = stack.forward(bert, ids, types, Some(keys), drop)?;
        let (states, mask, _) = stack.padded(hidden, on)?;
        Ok(GpuLeaf {
            states: Var::from_tensor(&states)?,
            mask,
        })
    }

    /// The engine's backward from the leaf's gradient in `store` (none: the loss did not reach
    /// it, and nothing is accumulated). `stack`'s last forward must be this leaf's, of `bert`.
    pub fn backward<D: Device>(
        self,
        stack: &mut Stack<D>,
        bert: &Bert,
        store: &GradStore,
        drop: Option<&Dropout>,
        grads: &Grads<D>,
    ) -> Result<()> {
        match store.get(self.states.as_tensor()) {
            Some(g) => stack.backward_padded(bert, g, drop, grads),
            None => Ok(()),
        }
    }
}
