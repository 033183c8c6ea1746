//! A bi-encoder step on the GPU engine (model/engine/gpu): every column's rows packed into one
//! forward, each named by (example, column) as the CPU engine names them (so the dropout masks
//! are the CPU engine's), the pooled rows split back into columns for the loss in candle, one
//! backward, the backbone's gradients exported beside the loss head's. One forward instead of one
//! a column: on a card a step's time goes to launches, and a column is as many as the batch.
use super::gradcache;
use super::task::BiEncoderTask;
use crate::error::Result;
use crate::model::engine::gpu::device::Device;
use crate::model::engine::gpu::grads::Grads;
use crate::model::engine::gpu::leaf::GpuLeaf;
use crate::model::engine::gpu::stack::Stack;
use crate::model::Dropout;
use crate::train::grads::ParamGrads;
use crate::train::params;
use crate::train::task::{dropout_key, Gradients};
use candle_core::backprop::GradStore;
use candle_core::Tensor;

/// The card the task's model lives on when the GPU engine trains it: asked for with
/// CONDENSER_GPU_ENGINE=1 (opt-in until its tests have passed on a lent card: written and
/// tested on the CPU's emulation only, docs/gpu.md), f32 weights on a CUDA device, BERT's GELU,
/// heads of width 32 or 64 (the CUDA kernels'), the engine not turned off
/// (CONDENSER_ENGINE=off). GradCache (a mini-batch size) runs on the engine too
/// (`cached`). None: candle's graph trains it.
#[cfg(feature = "cuda")]
pub fn card(task: &BiEncoderTask) -> Option<candle_core::cuda::CudaDevice> {
    use crate::model::Activation;
    let value = std::env::var("CONDENSER_GPU_ENGINE").unwrap_or_default();
    let asked = matches!(value.as_str(), "1" | "on");
    if !matches!(value.as_str(), "" | "0" | "off" | "1" | "on") {
        // a typo must not pass for "off" unseen: said once a process
        static SAID: std::sync::Once = std::sync::Once::new();
        SAID.call_once(|| {
            eprintln!(
                "warning: CONDENSER_GPU_ENGINE={value:?} is not 1, on, 0 or off; \
                 training through candle's graph"
            )
        });
    }
    let bert = &task.enc.bert;
    let w = bert.embeddings.word.embeddings();
    let fits = asked
        && crate::model::engine::enabled()
        && w.dtype() == candle_core::DType::F32
        && bert
            .layers
            .iter()
            .all(|l| l.act == Activation::Gelu && matches!(l.attention.head_dim, 32 | 64));
    match w.device() {
        candle_core::Device::Cuda(d) if fits => Some(d.clone()),
        _ => None,
    }
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
        let stack = Stack::new(Cuda::new(card)?, &task.enc.bert)?;
        let grads = stack.zero_grads(&candle_core::Device::Cuda(card.clone()))?;
        *slot = Some((stack, grads));
    }
    let (stack, grads) = slot.as_mut().expect("made above");
    match task.mini_batch {
        Some(m) => cached(task, stack, grads, idx, drop, weight, m),
        None => gradients(task, stack, grads, idx, drop, weight),
    }
}

/// The step's loss and gradients for rows `idx`, on `stack` (the task's model's), accumulating
/// into `grads` (restarted first). `weight` scales the loss (a share of a split batch). The
/// backbone's gradients are views of `grads`' arena, held by the returned gradients' lease.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub fn gradients<D: Device>(
    task: &BiEncoderTask,
    stack: &mut Stack<D>,
    grads: &mut Grads<D>,
    idx: &[usize],
    drop: Option<&Dropout>,
    weight: f64,
) -> Result<Gradients> {
    grads.restart(stack.device())?;
    let (leaf, emb) = embed(task, stack, idx, drop)?;
    let (loss, value) = task.weighted_loss(&emb, idx, weight)?;
    let store = loss.backward()?;
    leaf.backward(stack, &task.enc.bert, &store, drop, grads)?;
    finish(task, store, grads, value)
}

/// Rows `idx`' columns through `stack` in one forward, each row keyed as the CPU engine keys
/// it: the leaf (its tape in `stack` until the next forward) and each column's pooled rows.
pub(super) fn embed<D: Device>(
    task: &BiEncoderTask,
    stack: &mut Stack<D>,
    idx: &[usize],
    drop: Option<&Dropout>,
) -> Result<(GpuLeaf, Vec<Tensor>)> {
    let (columns, b) = (task.data.texts.len(), idx.len());
    let (mut seqs, mut keys) = (
        Vec::with_capacity(columns * b),
        Vec::with_capacity(columns * b),
    );
    for c in 0..columns {
        seqs.extend(task.column(c, idx));
        keys.extend(idx.iter().map(|&i| dropout_key(i, c)));
    }
    let bert = &task.enc.bert;
    let on = bert.embeddings.word.embeddings().device().clone();
    let leaf = GpuLeaf::forward(stack, bert, &seqs, None, &keys, drop, &on)?;
    let pooled = task.enc.pool(leaf.states.as_tensor(), &leaf.mask)?;
    let emb = (0..columns)
        .map(|c| pooled.narrow(0, c * b, b))
        .collect::<candle_core::Result<_>>()?;
    Ok((leaf, emb))
}

/// The step's gradients: the loss head's from `store`, the backbone's as views of `grads`' arena
/// (held by the result's lease).
pub(super) fn finish<D: Device>(
    task: &BiEncoderTask,
    store: GradStore,
    grads: &Grads<D>,
    value: f64,
) -> Result<Gradients> {
    let mut out = ParamGrads::from_store(&params::var_list(&task.varmap), store);
    let (pairs, lease) = grads.export(&task.enc.bert)?;
    out.add_pairs(pairs)?;
    out.hold(lease);
    Ok(Gradients {
        value,
        parts: Vec::new(),
        grads: out,
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
    stack: &mut Stack<D>,
    grads: &mut Grads<D>,
    idx: &[usize],
    drop: Option<&Dropout>,
    weight: f64,
    mini_batch: usize,
) -> Result<Gradients> {
    let chunks: Vec<&[usize]> = idx.chunks(mini_batch.max(1)).collect();
    let columns = task.data.texts.len();
    grads.restart(stack.device())?;
    let mut parts: Vec<Vec<Tensor>> = vec![Vec::with_capacity(chunks.len()); columns];
    for chunk in &chunks {
        let (_, emb) = embed(task, stack, chunk, drop)?;
        for (c, e) in emb.into_iter().enumerate() {
            parts[c].push(e.detach());
        }
    }
    let cached = gradcache::loss_over(task, &parts, idx, weight)?;
    std::mem::drop(parts);
    let mut start = 0;
    for chunk in &chunks {
        let (leaf, emb) = embed(task, stack, chunk, drop)?;
        if let Some(s) = gradcache::surrogate(&emb, &cached.emb_grads, start)? {
            leaf.backward(stack, &task.enc.bert, &s.backward()?, drop, grads)?;
        }
        start += chunk.len();
    }
    finish(task, cached.store, grads, cached.value)
}

#[cfg(test)]
#[path = "gpu_step_test.rs"]
mod tests;
