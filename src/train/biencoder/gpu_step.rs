//! A bi-encoder step on the GPU engine (model/engine/gpu), its gradients exported beside the loss
//! head's. Two routes: an in-batch ranking loss over a pooling the device runs (mean, cls) stays
//! on the device from the tokens to the gradients (model/engine/gpu/ranking.rs), whole or by
//! GradCache (here); any other loss runs in candle, the engine a backbone (`OnDevice`, gpu_backbone.rs) under the
//! one plain step and the one GradCache (plain.rs, gradcache.rs).
use super::gpu_backbone::{embed_on_device, OnDevice};
use super::task::BiEncoderTask;
use super::{gradcache, plain};
use crate::error::Result;
use crate::model::engine::gpu::{
    ranking_loss, Addr, Buf, Cuda, Device, DevicePooling, Grads, Shape,
};
use crate::model::engine::gpu::{Training, WholeBatch};
use crate::model::Dropout;
use crate::train::grads::ParamGrads;
use crate::train::losses::Ranking;
use crate::train::task::Gradients;

/// The loss and pooling of a task whose whole step runs on the device: an in-batch ranking
/// loss (`LossSpec::ranking`) over a pooling heads.cu runs. None: the loss runs in candle.
fn on_device(task: &BiEncoderTask) -> Option<(Ranking, DevicePooling)> {
    Some((task.spec.ranking?, DevicePooling::of(task.enc.pooling)?))
}

/// `gradients` on the task's GPU, the engine made at the first call and kept in the task.
pub fn on_gpu(
    task: &BiEncoderTask,
    gpu: &candle_core::cuda::CudaDevice,
    idx: &[usize],
    drop: Option<&Dropout>,
    weight: f64,
) -> Result<Gradients> {
    let mut slot = task.gpu.lock().unwrap_or_else(|e| e.into_inner());
    let engine = Training::<Cuda>::kept(&mut slot, gpu, &task.enc.bert)?;
    match task.mini_batch {
        Some(m) => cached(task, engine, idx, drop, weight, m),
        None => gradients(task, engine, idx, drop, weight),
    }
}

/// The step's loss and gradients for rows `idx`, on `gpu` (the task's model's engine),
/// accumulating into its arena (restarted first). `weight` scales the loss (a share of a split
/// batch). The backbone's gradients are views of the arena, held by the result's lease.
pub fn gradients<D: Device>(
    task: &BiEncoderTask,
    gpu: &mut Training<D>,
    idx: &[usize],
    drop: Option<&Dropout>,
    weight: f64,
) -> Result<Gradients>
where
    Training<D>: Send,
{
    gpu.grads.restart(gpu.stack.device())?;
    let bert = &task.enc.bert;
    if let Some((r, pooling)) = on_device(task) {
        let (emb, shape) = embed_on_device(task, gpu, pooling, idx, drop)?;
        let head = gpu.head.as_ref().expect("made by embed_on_device");
        let ids = r.exclude_shared.then(|| task.text_id_values(idx));
        let dev = gpu.stack.device();
        let (emb, grad) = ((emb, shape), head.grad()?);
        let value = ranking_loss(dev, &mut gpu.ranking, r, emb, ids.as_deref(), weight, grad)?;
        head.backward(&mut gpu.stack, bert, drop, &gpu.grads)?;
        return finish(task, ParamGrads::default(), &gpu.grads, value);
    }
    plain::gradients(task, &OnDevice::new(task, gpu, drop), idx, weight)
}

/// The step's gradients: the loss head's (`head`), the backbone's as views of `grads`' arena
/// (held by the result's lease).
pub(super) fn finish<D: Device>(
    task: &BiEncoderTask,
    mut head: ParamGrads,
    grads: &Grads<D>,
    value: f64,
) -> Result<Gradients> {
    head.add(ParamGrads::of_arena(grads.export(&task.enc.bert)?))?;
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
pub fn cached<D: Device>(
    task: &BiEncoderTask,
    gpu: &mut Training<D>,
    idx: &[usize],
    drop: Option<&Dropout>,
    weight: f64,
    mini_batch: usize,
) -> Result<Gradients>
where
    Training<D>: Send,
{
    let chunks: Vec<&[usize]> = idx.chunks(mini_batch.max(1)).collect();
    gpu.grads.restart(gpu.stack.device())?;
    if let Some(device) = on_device(task) {
        return cached_on_device(task, gpu, device, &chunks, idx, drop, weight);
    }
    gradcache::gradients(
        task,
        &OnDevice::new(task, gpu, drop),
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
    gpu: &mut Training<D>,
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
        let (emb, shape) = embed_on_device(task, gpu, pooling, chunk, drop)?;
        width = shape.width;
        let len = columns * total * width;
        if gpu.cache.as_ref().is_none_or(|c| c.len < len) {
            gpu.cache = None; // freed before the larger one is allocated
            let dev = gpu.stack.device();
            let (emb, grad) = (Buf::zeros(dev, len)?, Buf::zeros(dev, len)?);
            gpu.cache = Some(WholeBatch { len, emb, grad });
        }
        let whole = gpu.cache.as_ref().expect("made above");
        let rows = Rows::of((columns, total), (start, chunk.len()), width);
        rows.copy(gpu.stack.device(), (emb, whole.emb.at(0)), true)?;
        start += chunk.len();
    }
    let Some(whole) = gpu.cache.as_ref() else {
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
        gpu.stack.device(),
        (whole.emb.at(0), shape),
        whole.grad.at(0),
    );
    let value = ranking_loss(dev, &mut gpu.ranking, r, emb, ids.as_deref(), weight, grad)?;
    // pass 2: each mini-batch again, from its rows of the gradient
    let bert = &task.enc.bert;
    let mut start = 0;
    for chunk in chunks {
        embed_on_device(task, gpu, pooling, chunk, drop)?;
        let (Some(head), Some(whole)) = (gpu.head.as_ref(), gpu.cache.as_ref()) else {
            unreachable!("made in pass 1")
        };
        let rows = Rows::of((columns, total), (start, chunk.len()), width);
        rows.copy(gpu.stack.device(), (head.grad()?, whole.grad.at(0)), false)?;
        head.backward(&mut gpu.stack, bert, drop, &gpu.grads)?;
        start += chunk.len();
    }
    finish(task, ParamGrads::default(), &gpu.grads, value)
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

#[cfg(test)]
#[path = "gpu_ranking_test.rs"]
mod ranking_tests;
