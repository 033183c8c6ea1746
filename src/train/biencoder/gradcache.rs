//! GradCache (Gao et al. 2021; sentence-transformers' CachedMultipleNegativesRankingLoss): the
//! gradient of a loss that couples the whole batch (in-batch negatives), in memory bounded by a
//! mini-batch. (1) Embed every mini-batch without keeping its graph; (2) the loss over all the
//! embeddings and its gradient with respect to them; (3) embed each mini-batch again, with the same
//! dropout masks, and backpropagate that gradient through it. The parameter gradients are the
//! whole batch's, as if it had been embedded at once.
use super::task::BiEncoderTask;
use crate::error::Result;
use crate::model::engine::{in_threads, Engine};
use crate::model::Dropout;
use crate::train::grads::ParamGrads;
use crate::train::task::Gradients;
use candle_core::backprop::GradStore;
use candle_core::{Tensor, Var};

/// Step (2): the loss over the whole batch's embeddings (`parts[c]`: column c's mini-batches in
/// order, no graph), its value, its gradient with respect to each column's embeddings, and the
/// store that is left: the loss's own parameters' gradients (none for MNR).
pub(super) struct Cached {
    pub(super) value: f64,
    pub(super) emb_grads: Vec<Tensor>,
    pub(super) store: GradStore,
}

pub(super) fn loss_over(
    task: &BiEncoderTask,
    parts: &[Vec<Tensor>],
    idx: &[usize],
    weight: f64,
) -> Result<Cached> {
    let leaves: Vec<Var> = parts
        .iter()
        .map(|p| Var::from_tensor(&Tensor::cat(p, 0)?))
        .collect::<candle_core::Result<_>>()?;
    let emb: Vec<Tensor> = leaves.iter().map(|v| v.as_tensor().clone()).collect();
    let (loss, value) = task.weighted_loss(&emb, idx, weight)?;
    let mut store = loss.backward()?;
    let emb_grads = leaves
        .iter()
        .map(|v| {
            store
                .remove(v.as_tensor())
                .map_or_else(|| v.as_tensor().zeros_like(), |g| Ok(g.detach()))
        })
        .collect::<candle_core::Result<_>>()?;
    Ok(Cached {
        value,
        emb_grads,
        store,
    })
}

/// Step (3)'s loss for one mini-batch (rows `start..` of the batch): the sum over columns of its
/// embeddings times their cached gradients, whose gradient is those gradients. None: no column.
pub(super) fn surrogate(
    emb: &[Tensor],
    emb_grads: &[Tensor],
    start: usize,
) -> Result<Option<Tensor>> {
    let mut total: Option<Tensor> = None;
    for (e, g) in emb.iter().zip(emb_grads) {
        let s = (e * g.narrow(0, start, e.dim(0)?)?)?.sum_all()?;
        total = Some(match total {
            Some(t) => (t + s)?,
            None => s,
        });
    }
    Ok(total)
}

pub fn gradients(
    task: &BiEncoderTask,
    idx: &[usize],
    drop: Option<&Dropout>,
    weight: f64,
    mini_batch: usize,
) -> Result<Gradients> {
    let chunks: Vec<&[usize]> = idx.chunks(mini_batch.max(1)).collect();
    // chunk k draws from a fresh fork k stream in both passes: the second sees the first's masks
    let stream = |k: usize| drop.map(|d| d.fork(k as u64));
    let columns = task.data.texts.len();
    let mut parts: Vec<Vec<Tensor>> = vec![Vec::with_capacity(chunks.len()); columns];
    for (k, chunk) in chunks.iter().enumerate() {
        // detach drops the chunk's graph as soon as its embeddings are out
        for (c, e) in task
            .embed_columns(chunk, stream(k).as_ref())?
            .into_iter()
            .enumerate()
        {
            parts[c].push(e.detach());
        }
    }
    let cached = loss_over(task, &parts, idx, weight)?;
    std::mem::drop(parts);
    let params = crate::train::params::var_list(&task.varmap);
    let mut kept = ParamGrads::from_store(&params, cached.store);
    // the encoder's gradients, one mini-batch's graph at a time (each store is dropped as soon
    // as its gradients are out)
    let mut start = 0;
    for (k, chunk) in chunks.iter().enumerate() {
        let e = task.embed_columns(chunk, stream(k).as_ref())?;
        if let Some(s) = surrogate(&e, &cached.emb_grads, start)? {
            kept.add(ParamGrads::from_store(&params, s.backward()?))?;
        }
        start += chunk.len();
    }
    Ok(Gradients {
        value: cached.value,
        parts: Vec::new(),
        grads: kept,
    })
}

/// GradCache through the engine: pass 1 embeds every mini-batch with no tape at all; the loss
/// and its gradient with respect to all the embeddings; pass 2 embeds each mini-batch's columns
/// again, one at a time with its tape (the same dropout: masks are keyed by example and column),
/// and runs the engine's backward from that gradient. With several threads, thread t takes
/// mini-batches t, t + n, ... (serial BLAS each) into its own gradient buffers. At any moment each
/// thread holds one column of one mini-batch's tape: memory is bounded by the mini-batch.
pub fn engine_gradients(
    task: &BiEncoderTask,
    eng: &Engine,
    idx: &[usize],
    drop: Option<&Dropout>,
    weight: f64,
    mini_batch: usize,
) -> Result<Gradients> {
    let size = mini_batch.max(1);
    let chunks: Vec<&[usize]> = idx.chunks(size).collect();
    let columns = task.data.texts.len();
    let n = task.threads.clamp(1, chunks.len().max(1));
    let mine = |t: usize| (t..chunks.len()).step_by(n);
    let firsts = in_threads(n, |t| -> Result<Vec<(usize, Vec<Tensor>)>> {
        let mut out = Vec::new();
        for k in mine(t) {
            let e = (0..columns)
                .map(|c| Ok(task.embed_engine(eng, c, chunks[k], drop, false)?.0))
                .collect::<Result<Vec<_>>>()?;
            out.push((k, e));
        }
        Ok(out)
    })?;
    let mut by_chunk: Vec<(usize, Vec<Tensor>)> = firsts.into_iter().flatten().collect();
    by_chunk.sort_by_key(|x| x.0);
    let parts: Vec<Vec<Tensor>> = (0..columns)
        .map(|c| by_chunk.iter().map(|(_, e)| e[c].clone()).collect())
        .collect();
    std::mem::drop(by_chunk);
    let cached = loss_over(task, &parts, idx, weight)?;
    std::mem::drop(parts);
    // the loss's own parameters (none for MNR); the encoder's come from pass 2
    let params = crate::train::params::var_list(&task.varmap);
    let mut kept = ParamGrads::from_store(&params, cached.store);
    let per_thread = in_threads(n, |t| -> Result<Vec<(Tensor, Tensor)>> {
        let mut eg = eng.zero_grads()?;
        for k in mine(t) {
            for (c, g) in cached.emb_grads.iter().enumerate() {
                let (e, leaf) = task.embed_engine(eng, c, chunks[k], drop, true)?;
                let s = (e * g.narrow(0, k * size, chunks[k].len())?)?.sum_all()?;
                let store = s.backward()?;
                if let Some(leaf) = leaf {
                    leaf.backward(eng, &store, drop, &mut eg)?;
                }
            }
        }
        Ok(eng.export(eg)?)
    })?;
    for g in per_thread {
        kept.add_pairs(g)?;
    }
    Ok(Gradients {
        value: cached.value,
        parts: Vec::new(),
        grads: kept,
    })
}
