//! Where the GPU engine meets candle, as ../cpu/leaf.rs for the CPU engine: a forward whose last
//! layer's states enter candle's graph as a leaf (padded (b, len, h) on the model's device, with
//! the 0/1 mask the heads pool by), so that a head and a loss run as candle ops; after candle's
//! backward, the leaf's gradient goes back through the engine (packed again on the device).
use super::device::{Addr, Device};
use super::grads::Grads;
use super::heads::EmbedHead;
use super::stack::Stack;
use crate::model::{Bert, Dropout};
use candle_core::backprop::GradStore;
use candle_core::{Result, Tensor, Var};

pub struct Leaf {
    /// (b, len, h): the states of real tokens, zeros where padded.
    pub states: Var,
    /// (b, len) 0/1: 1 for real tokens.
    pub mask: Tensor,
}

impl Leaf {
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
    ) -> Result<Leaf> {
        let hidden = stack.forward(bert, ids, types, Some(keys), drop)?;
        let (states, mask, _) = stack.padded(hidden, on)?;
        Ok(Leaf { states, mask })
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

/// The last forward's embeddings, pooled on the device by an `EmbedHead` (heads.rs), entering
/// candle's graph as a leaf (n x width on the model's device): what a head or loss in candle
/// reads when the pooling is one the device runs, a copy of n rows instead of the padded
/// batch.
pub struct PooledLeaf {
    pub emb: Var,
}

impl PooledLeaf {
    /// The embeddings an `EmbedHead`'s forward left at `at` (n x width on `dev`), copied into a
    /// leaf on `on`.
    pub fn of<D: Device>(
        dev: &D,
        at: Addr,
        (n, width): (usize, usize),
        on: &candle_core::Device,
    ) -> Result<PooledLeaf> {
        let (emb, to) = dev.new_var(&[n, width], on)?;
        dev.copy(to, at, 4 * n * width)?;
        Ok(PooledLeaf { emb })
    }

    /// The engine's backward from the leaf's gradient in `store` (none: the loss did not reach
    /// it, and nothing is accumulated) through `head`; `stack`'s last forward must be this
    /// leaf's, of `bert`.
    pub fn backward<D: Device>(
        self,
        stack: &mut Stack<D>,
        head: &EmbedHead<D>,
        (bert, store): (&Bert, &GradStore),
        drop: Option<&Dropout>,
        grads: &Grads<D>,
    ) -> Result<()> {
        let Some(g) = store.get(self.emb.as_tensor()) else {
            return Ok(());
        };
        if g.dims() != self.emb.dims() {
            candle_core::bail!(
                "gpu engine: a gradient of {:?} for {:?}",
                g.dims(),
                self.emb.dims()
            )
        }
        let g = g.contiguous()?;
        let dev = stack.device();
        dev.copy(head.grad()?, dev.tensor_addr(&g)?, 4 * g.elem_count())?;
        head.backward(stack, bert, drop, grads)
    }
}
