//! A bi-encoder step on the GPU engine (model/engine/gpu): every column's rows packed into one
//! forward, each named by (example, column) as the CPU engine names them (so the dropout masks
//! are the CPU engine's), one backward, the backbone's gradients exported beside the loss
//! head's. One forward instead of one a column: on a card a step's time goes to launches, and a
//! column is as many as the batch. Two routes: an in-batch ranking loss over a pooling the
//! device runs (mean, cls) stays on the device from the tokens to the gradients (gpu_ranking.rs);
//! any other loss runs in candle, the engine a backbone (`OnDevice`) under the one plain step
//! and the one GradCache (plain.rs, gradcache.rs).
use super::backbone::Backbone;
use super::card::{Card, WholeBatch};
use super::gpu_ranking::{ranking_loss, Shape};
use super::task::BiEncoderTask;
use super::{gradcache, plain};
use crate::error::Result;
use crate::model::engine::gpu::device::{Addr, Buf, Device};
use crate::model::engine::gpu::grads::Grads;
use crate::model::engine::gpu::heads::{DevicePooling, EmbedHead};
use crate::model::engine::gpu::leaf::{GpuLeaf, PooledLeaf};
use crate::model::engine::gpu::stack::Stack;
use crate::model::Dropout;
use crate::train::grads::ParamGrads;
use crate::train::losses::Ranking;
use crate::train::task::{dropout_key, Gradients};
use candle_core::backprop::GradStore;
use candle_core::Tensor;
use std::sync::Mutex;

/// The loss and pooling of a task whose whole step runs on the device: an in-batch ranking
/// loss (`LossSpec::ranking`) over a pooling heads.cu runs. None: the loss runs in candle.
fn on_device(task: &BiEncoderTask) -> Option<(Ranking, DevicePooling)> {
    Some((task.spec.ranking?, DevicePooling::of(task.enc.pooling)?))
}

/// `gradients` on the task's card, the engine made at the first call and kept in the task.
#[cfg(feature = "cuda")]
pub fn on_card(
    task: &BiEncoderTask,
    card: &candle_core::cuda::CudaDevice,
    idx: &[usize],
    drop: Option<&Dropout>,
    weight: f64,
) -> Result<Gradients> {
    use crate::model::engine::gpu::cuda::Cuda;
    let mut slot = task.gpu.lock().unwrap_or_else(|e| e.into_inner());
    if slot.is_none() {
        let on = candle_core::Device::Cuda(card.clone());
        *slot = Some(Card::new(Cuda::new(card)?, &task.enc.bert, &on)?);
    }
    let engine = slot.as_mut().expect("made above");
    match task.mini_batch {
        Some(m) => cached(task, engine, idx, drop, weight, m),
        None => gradients(task, engine, idx, drop, weight),
    }
}

/// The step's loss and gradients for rows `idx`, on `card` (the task's model's engine),
/// accumulating into its arena (restarted first). `weight` scales the loss (a share of a split
/// batch). The backbone's gradients are views of the arena, held by the result's lease.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub fn gradients<D: Device>(
    task: &BiEncoderTask,
    card: &mut Card<D>,
    idx: &[usize],
    drop: Option<&Dropout>,
    weight: f64,
) -> Result<Gradients>
where
    Card<D>: Send,
{
    card.grads.restart(card.stack.device())?;
    let bert = &task.enc.bert;
    if let Some((r, pooling)) = on_device(task) {
        let (emb, shape) = embed_on_device(task, card, pooling, idx, drop)?;
        let head = card.head.as_ref().expect("made by embed_on_device");
        let ids = r.exclude_shared.then(|| task.text_id_values(idx));
        let dev = card.stack.device();
        let (emb, grad) = ((emb, shape), head.grad()?);
        let value = ranking_loss(dev, &mut card.ranking, r, emb, ids.as_deref(), weight, grad)?;
        head.backward(&mut card.stack, bert, drop, &card.grads)?;
        return finish(task, ParamGrads::default(), &card.grads, value);
    }
    plain::gradients(task, &OnDevice::new(task, card, drop), idx, weight)
}

/// The GPU engine as a backbone (backbone.rs) for a loss in candle: every column's rows packed
/// into one forward (its tape in the stack until the next forward), pooled on the device into a
/// leaf of n rows (`PooledLeaf`) where the device runs the pooling, else pooled by candle over
/// the padded rows (max). One thread: the card is one stream.
struct OnDevice<'a, D: Device> {
    task: &'a BiEncoderTask,
    card: Mutex<&'a mut Card<D>>,
    drop: Option<&'a Dropout>,
    pooling: Option<DevicePooling>,
}

/// What an `OnDevice` forward keeps for its backward.
enum Tape {
    Padded(GpuLeaf),
    Pooled(PooledLeaf),
}

impl<'a, D: Device> OnDevice<'a, D> {
    fn new(task: &'a BiEncoderTask, card: &'a mut Card<D>, drop: Option<&'a Dropout>) -> Self {
        OnDevice {
            task,
            card: Mutex::new(card),
            drop,
            pooling: DevicePooling::of(task.enc.pooling),
        }
    }
}

impl<D: Device> Backbone for OnDevice<'_, D>
where
    Card<D>: Send,
{
    type Tape = Tape;
    type Grads = ();

    fn threads(&self) -> usize {
        1
    }

    fn embed(
        &self,
        rows: &[usize],
        _: Option<usize>,
        tape: bool,
    ) -> Result<(Vec<Tensor>, Option<Tape>)> {
        let (task, b) = (self.task, rows.len());
        let mut card = self.card.lock().unwrap_or_else(|e| e.into_inner());
        let (emb, kept) = match self.pooling {
            Some(pooling) => {
                let (at, shape) = embed_on_device(task, &mut card, pooling, rows, self.drop)?;
                let on = task.enc.bert.embeddings.word.embeddings().device().clone();
                let (n, width) = (shape.rows, shape.width);
                let leaf = PooledLeaf::of(card.stack.device(), at, (n, width), &on)?;
                let emb = (0..task.data.texts.len())
                    .map(|c| leaf.emb.as_tensor().narrow(0, c * b, b))
                    .collect::<candle_core::Result<Vec<_>>>()?;
                (emb, Tape::Pooled(leaf))
            }
            None => {
                let (leaf, emb) = embed(task, &mut card.stack, rows, self.drop)?;
                (emb, Tape::Padded(leaf))
            }
        };
        if tape {
            return Ok((emb, Some(kept)));
        }
        Ok((emb.iter().map(Tensor::detach).collect(), None))
    }

    fn zero_grads(&self) -> Result<()> {
        Ok(())
    }

    fn backward(&self, tape: Tape, store: &GradStore, _: &mut ()) -> Result<()> {
        let mut guard = self.card.lock().unwrap_or_else(|e| e.into_inner());
        let card = &mut **guard;
        let bert = &self.task.enc.bert;
        match tape {
            Tape::Padded(leaf) => {
                leaf.backward(&mut card.stack, bert, store, self.drop, &card.grads)?
            }
            Tape::Pooled(leaf) => {
                let head = card.head.as_ref().expect("made by embed_on_device");
                leaf.backward(&mut card.stack, head, (bert, store), self.drop, &card.grads)?
            }
        }
        Ok(())
    }

    /// The backbone's gradients as views of the card's arena (held by the result's lease).
    fn export(&self, _: ()) -> Result<ParamGrads> {
        let card = self.card.lock().unwrap_or_else(|e| e.into_inner());
        let (pairs, lease) = card.grads.export(&self.task.enc.bert)?;
        let mut out = ParamGrads::default();
        out.add_pairs(pairs)?;
        out.hold(lease);
        Ok(out)
    }
}

/// Rows `idx`' columns as one forward's sequences, column after column, each keyed as the CPU
/// engine keys it (example, column).
fn packed_columns<'t>(task: &'t BiEncoderTask, idx: &[usize]) -> (Vec<&'t [u32]>, Vec<u64>) {
    let (columns, b) = (task.data.texts.len(), idx.len());
    let (mut seqs, mut keys) = (
        Vec::with_capacity(columns * b),
        Vec::with_capacity(columns * b),
    );
    for c in 0..columns {
        seqs.extend(task.column(c, idx));
        keys.extend(idx.iter().map(|&i| dropout_key(i, c)));
    }
    (seqs, keys)
}

/// Rows `idx`' columns through `stack` in one forward: the leaf (its tape in `stack` until the
/// next forward) and each column's pooled rows, in candle.
pub(super) fn embed<D: Device>(
    task: &BiEncoderTask,
    stack: &mut Stack<D>,
    idx: &[usize],
    drop: Option<&Dropout>,
) -> Result<(GpuLeaf, Vec<Tensor>)> {
    let (seqs, keys) = packed_columns(task, idx);
    let bert = &task.enc.bert;
    let on = bert.embeddings.word.embeddings().device().clone();
    let leaf = GpuLeaf::forward(stack, bert, &seqs, None, &keys, drop, &on)?;
    let pooled = task.enc.pool(leaf.states.as_tensor(), &leaf.mask)?;
    let b = idx.len();
    let emb = (0..task.data.texts.len())
        .map(|c| pooled.narrow(0, c * b, b))
        .collect::<candle_core::Result<_>>()?;
    Ok((leaf, emb))
}

/// Rows `idx`' columns through the stack and the device's head (made at the first call): the
/// embeddings' address (column after column, `idx.len()` rows each) and shape, valid until the
/// next forward.
fn embed_on_device<D: Device>(
    task: &BiEncoderTask,
    card: &mut Card<D>,
    pooling: DevicePooling,
    idx: &[usize],
    drop: Option<&Dropout>,
) -> Result<(Addr, Shape)> {
    let (seqs, keys) = packed_columns(task, idx);
    let bert = &task.enc.bert;
    card.stack.forward(bert, &seqs, None, Some(&keys), drop)?;
    let hidden = bert.embeddings.word.embeddings().dim(1)?;
    let head = card
        .head
        .get_or_insert_with(|| EmbedHead::new(pooling, task.enc.normalize, hidden));
    let emb = head.forward(&card.stack)?;
    let shape = Shape {
        rows: seqs.len(),
        anchors: idx.len(),
        width: head.width,
    };
    Ok((emb, shape))
}

/// The step's gradients: the loss head's (`head`), the backbone's as views of `grads`' arena
/// (held by the result's lease).
pub(super) fn finish<D: Device>(
    task: &BiEncoderTask,
    mut head: ParamGrads,
    grads: &Grads<D>,
    value: f64,
) -> Result<Gradients> {
    let (pairs, lease) = grads.export(&task.enc.bert)?;
    head.add_pairs(pairs)?;
    head.hold(lease);
    Ok(Gradients {
        value,
        parts: Vec::new(),
        grads: head,
    })
}

/// GradCache on the GPU engine (one stack, one gradient arena): pass 1 embeds each
/// mini-batch's columns in one forward (the tape is overwritten by the next); the loss and its
/// gradient with respect to all the embeddings; pass 2 embeds each mini-batch again (masks are
/// keyed by example and column, as the CPU engine keys them, so they are pass 1's) and runs the
/// engine's backward from that gradient, summing into the arena (restarted once, before pass 1).
/// The workspace is the mini-batch's: memory is bounded by it.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub fn cached<D: Device>(
    task: &BiEncoderTask,
    card: &mut Card<D>,
    idx: &[usize],
    drop: Option<&Dropout>,
    weight: f64,
    mini_batch: usize,
) -> Result<Gradients>
where
    Card<D>: Send,
{
    let chunks: Vec<&[usize]> = idx.chunks(mini_batch.max(1)).collect();
    card.grads.restart(card.stack.device())?;
    if let Some(device) = on_device(task) {
        return cached_on_device(task, card, device, &chunks, idx, drop, weight);
    }
    gradcache::gradients(
        task,
        &OnDevice::new(task, card, drop),
        idx,
        weight,
        mini_batch,
    )
}

/// `cached` with the loss on the device: pass 1 copies each mini-batch's embeddings into the
/// whole batch's (column after column, as one forward would have laid them), the ranking loss
/// runs over them, and pass 2 hands each mini-batch its rows of the gradient.
#[allow(clippy::too_many_arguments)]
fn cached_on_device<D: Device>(
    task: &BiEncoderTask,
    card: &mut Card<D>,
    (r, pooling): (Ranking, DevicePooling),
    chunks: &[&[usize]],
    idx: &[usize],
    drop: Option<&Dropout>,
    weight: f64,
) -> Result<Gradients> {
    let (columns, total) = (task.data.texts.len(), idx.len());
    let mut width = 0;
    // pass 1: every mini-batch's embeddings into the whole batch's
    let mut start = 0;
    for chunk in chunks {
        let (emb, shape) = embed_on_device(task, card, pooling, chunk, drop)?;
        width = shape.width;
        let len = columns * total * width;
        if card.cache.as_ref().is_none_or(|c| c.len < len) {
            card.cache = None; // freed before the larger one is allocated
            let dev = card.stack.device();
            let (emb, grad) = (Buf::zeros(dev, len)?, Buf::zeros(dev, len)?);
            card.cache = Some(WholeBatch { len, emb, grad });
        }
        let whole = card.cache.as_ref().expect("made above");
        let rows = Rows::of((columns, total), (start, chunk.len()), width);
        rows.copy(card.stack.device(), (emb, whole.emb.at(0)), true)?;
        start += chunk.len();
    }
    let Some(whole) = card.cache.as_ref() else {
        return Err(crate::error::Error::msg(
            "GradCache on the device: an empty batch",
        ));
    };
    let shape = Shape {
        rows: columns * total,
        anchors: total,
        width,
    };
    let ids = r.exclude_shared.then(|| task.text_id_values(idx));
    let (dev, emb, grad) = (
        card.stack.device(),
        (whole.emb.at(0), shape),
        whole.grad.at(0),
    );
    let value = ranking_loss(dev, &mut card.ranking, r, emb, ids.as_deref(), weight, grad)?;
    // pass 2: each mini-batch again, from its rows of the gradient
    let bert = &task.enc.bert;
    let mut start = 0;
    for chunk in chunks {
        embed_on_device(task, card, pooling, chunk, drop)?;
        let (Some(head), Some(whole)) = (card.head.as_ref(), card.cache.as_ref()) else {
            unreachable!("made in pass 1")
        };
        let rows = Rows::of((columns, total), (start, chunk.len()), width);
        rows.copy(card.stack.device(), (head.grad()?, whole.grad.at(0)), false)?;
        head.backward(&mut card.stack, bert, drop, &card.grads)?;
        start += chunk.len();
    }
    finish(task, ParamGrads::default(), &card.grads, value)
}

/// A mini-batch's place in the whole batch: rows start .. start + m of each of `columns`
/// columns of `total` rows, `width` f32s a row.
struct Rows {
    columns: usize,
    total: usize,
    start: usize,
    m: usize,
    width: usize,
}

impl Rows {
    fn of((columns, total): (usize, usize), (start, m): (usize, usize), width: usize) -> Rows {
        Rows {
            columns,
            total,
            start,
            m,
            width,
        }
    }

    /// Each column's rows between the mini-batch's buffer (its columns one after another) and
    /// the whole batch's: into the whole where `into_whole`, else out of it.
    fn copy<D: Device>(
        &self,
        dev: &D,
        (chunk, whole): (Addr, Addr),
        into_whole: bool,
    ) -> Result<()> {
        let (w, bytes) = (self.width, 4 * self.m * self.width);
        for c in 0..self.columns {
            let at_chunk = chunk + (4 * c * self.m * w) as Addr;
            let at_whole = whole + (4 * (c * self.total + self.start) * w) as Addr;
            match into_whole {
                true => dev.copy(at_whole, at_chunk, bytes)?,
                false => dev.copy(at_chunk, at_whole, bytes)?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "gpu_step_test.rs"]
mod tests;
