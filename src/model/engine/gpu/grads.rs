//! The GPU engine's gradients: one arena for every parameter of a stack, accumulated in place by
//! backward (GEMM beta 1, the kernels' partial sums), zeroed by one fill a step. The arena is an
//! f32 tensor on the model's device, so that a parameter's gradient goes to the optimizer as a
//! view of it: no copy and no allocation a step (AdamW's kernel reads it where backward wrote
//! it; train/adamw/slots.rs takes a view's offset). Copying ~100 gradients out was the largest share of
//! what a step still allocated (docs/gpu.md).
//!
//! A view is only good until the arena is zeroed for the next batch. Every export hands out a
//! `Lease` that the holder keeps beside the views (train/grads.rs's `ParamGrads`); `restart`
//! zeroes the arena in place only when no lease is out, and otherwise moves to a new arena,
//! leaving the held views theirs. So gradients summed over micro-batches or threads' shards stay
//! right, and the usual step (one batch, its gradients consumed by the update) reuses one arena.
use super::device::{Addr, Device};
use crate::model::engine::weights::{embedding_tensors, layer_tensors};
use crate::model::Bert;
use candle_core::{bail, Result, Tensor, TensorId};
use std::marker::PhantomData;
use std::sync::Arc;

/// Where each parameter's gradient lies in the arena (element offsets).
#[derive(Clone, Debug)]
pub(super) struct Layout {
    /// word, position, type, LayerNorm weight, LayerNorm bias (the last two end to end)
    pub(super) emb: [usize; 5],
    /// per layer, in `LayerAddrs`' fields' order; g1 b1 bo and g2 b2 bd end to end, as the
    /// LayerNorms' backward writes their partial sums
    pub(super) layers: Vec<[usize; 12]>,
    len: usize,
    hidden: usize,
    /// the word embeddings' id: the model's identity
    model: TensorId,
}

impl Layout {
    /// The arena's layout for `bert` (hidden size h, intermediate size i).
    pub(super) fn of(bert: &Bert, h: usize, i: usize) -> Layout {
        let e = embedding_tensors(&bert.embeddings);
        let mut len = 0;
        let mut take = |n: usize| {
            let at = len;
            len += n;
            at
        };
        let emb = [
            take(e[0].elem_count()),
            take(e[1].elem_count()),
            take(e[2].elem_count()),
            take(h),
            take(h),
        ];
        let mut layers = Vec::new();
        for _ in &bert.layers {
            let wqkv = take(3 * h * h);
            let bqkv = take(3 * h);
            let wo = take(h * h);
            let (g1, b1, bo) = (take(h), take(h), take(h));
            let wi = take(i * h);
            let bi = take(i);
            let wd = take(h * i);
            let (g2, b2, bd) = (take(h), take(h), take(h));
            layers.push([wqkv, bqkv, wo, bo, g1, b1, wi, bi, wd, bd, g2, b2]);
        }
        Layout {
            emb,
            layers,
            len,
            hidden: h,
            model: e[0].id(),
        }
    }

    /// Err unless `bert` is the model the layout was made for.
    pub(super) fn check(&self, bert: &Bert) -> Result<()> {
        if embedding_tensors(&bert.embeddings)[0].id() != self.model {
            bail!("gpu engine: called with another model than it was made for")
        }
        Ok(())
    }
}

/// Keeps the arena an export's views read from being zeroed while it is held (see the module's
/// doc); dropped with the gradients it came with.
#[derive(Clone, Debug)]
pub struct Lease(#[allow(dead_code)] Arc<()>);

/// The gradients of a stack's parameters, accumulated over backward passes, in one arena.
pub struct Grads<D: Device> {
    arena: Tensor,
    addr: Addr,
    pub(super) layout: Layout,
    /// the arena's lease: shared with every export of it still held
    lease: Arc<()>,
    _dev: PhantomData<D>,
}

impl<D: Device> Grads<D> {
    /// A zeroed arena for `layout` on `on` (candle's handle on `dev`).
    pub(super) fn new(dev: &D, layout: Layout, on: &candle_core::Device) -> Result<Grads<D>> {
        let (arena, addr) = dev.new_tensor(&[layout.len], on)?;
        Ok(Grads {
            arena,
            addr,
            layout,
            lease: Arc::new(()),
            _dev: PhantomData,
        })
    }

    /// The address of element `off`.
    pub(super) fn at(&self, off: usize) -> Addr {
        self.addr + 4 * off as Addr
    }

    /// Every gradient to zero for a new batch: one fill of the arena, or, while an earlier
    /// export's views are still held, a new arena (theirs is left to them).
    pub fn restart(&mut self, dev: &D) -> Result<()> {
        if Arc::strong_count(&self.lease) > 1 {
            let on = self.arena.device().clone();
            let (arena, addr) = dev.new_tensor(&[self.layout.len], &on)?;
            (self.arena, self.addr, self.lease) = (arena, addr, Arc::new(()));
            return Ok(());
        }
        dev.zero(self.addr, 4 * self.layout.len)
    }

    /// Each parameter (the model's tensor) with its gradient, a view of the arena (no copy), in
    /// `Stack::export`'s order (q, k and v split again), and the lease to keep while the views
    /// are read.
    pub fn export(&self, bert: &Bert) -> Result<(Vec<(Tensor, Tensor)>, Lease)> {
        let mut out = Vec::new();
        for (t, at) in self.parameters(bert)? {
            let g = self
                .arena
                .narrow(0, at, t.elem_count())?
                .reshape(t.dims())?;
            out.push((t, g));
        }
        Ok((out, Lease(self.lease.clone())))
    }

    /// Each parameter with its gradient read back to the host, in `export`'s order.
    pub fn export_host(&self, dev: &D, bert: &Bert) -> Result<Vec<(Tensor, Vec<f32>)>> {
        let mut all = vec![0f32; self.layout.len];
        dev.download(self.addr, bytemuck::cast_slice_mut(&mut all))?;
        Ok(self
            .parameters(bert)?
            .into_iter()
            .map(|(t, at)| {
                let n = t.elem_count();
                (t, all[at..at + n].to_vec())
            })
            .collect())
    }

    /// Each parameter with where its gradient starts in the arena, in `Stack::export`'s order.
    fn parameters(&self, bert: &Bert) -> Result<Vec<(Tensor, usize)>> {
        self.layout.check(bert)?;
        let mut out = Vec::new();
        let e = embedding_tensors(&bert.embeddings);
        for (k, t) in e.into_iter().enumerate() {
            out.push((t.clone(), self.layout.emb[k]));
        }
        let h = self.layout.hidden;
        for (layer, off) in bert.layers.iter().zip(&self.layout.layers) {
            let ts = layer_tensors(layer)?;
            let mut at: Vec<usize> = Vec::new();
            for k in 0..3 {
                at.push(off[0] + k * h * h);
                at.push(off[1] + k * h);
            }
            // wo bo g1 b1 wi bi wd bd g2 b2, as layer_tensors orders them
            at.extend([2usize, 3, 4, 5, 6, 7, 8, 9, 10, 11].map(|f| off[f]));
            out.extend(ts.into_iter().cloned().zip(at));
        }
        Ok(out)
    }
}
