//! GradCache (Gao et al. 2021; sentence-transformers' CachedMultipleNegativesRankingLoss): the
//! gradient of a loss that couples the whole batch (in-batch negatives), in memory bounded by a
//! mini-batch. (1) Embed every mini-batch without keeping its graph; (2) the loss over all the
//! embeddings and its gradient with respect to them; (3) embed each mini-batch again, with the same
//! dropout masks, and backpropagate that gradient through it. The parameter gradients are the
//! whole batch's, as if it had been embedded at once. Written once over the backbone
//! (backbone.rs): candle's graph, the CPU engine, the GPU engine with the loss in candle.
use super::task::BiEncoderTask;
use crate::error::Result;
use crate::model::engine::in_threads;
use crate::train::backbone::Backbone;
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

/// GradCache over `bb`: pass 1 embeds every mini-batch with no tape; the loss and its gradient
/// with respect to all the embeddings; pass 2 embeds each mini-batch again with its tape (the
/// same dropout masks) and runs the backbone's backward from that gradient. With several
/// threads, thread t takes mini-batches t, t + n, ... (serial BLAS each) into its own
/// gradients. At any moment each thread holds one mini-batch's tape: memory is bounded by the
/// mini-batch.
pub(super) fn gradients<B: Backbone>(
    task: &BiEncoderTask,
    bb: &B,
    idx: &[usize],
    weight: f64,
    mini_batch: usize,
) -> Result<Gradients> {
    let size = mini_batch.max(1);
    let chunks: Vec<&[usize]> = idx.chunks(size).collect();
    let n = bb.threads().clamp(1, chunks.len().max(1));
    let mine = |t: usize| (t..chunks.len()).step_by(n);
    let firsts = in_threads(n, |t| -> Result<Vec<(usize, Vec<Tensor>)>> {
        mine(t)
            .map(|k| Ok((k, bb.embed(chunks[k], Some(k), false)?.0)))
            .collect()
    })?;
    let mut by_chunk: Vec<(usize, Vec<Tensor>)> = firsts.into_iter().flatten().collect();
    by_chunk.sort_by_key(|x| x.0);
    let parts: Vec<Vec<Tensor>> = (0..task.data.texts.len())
        .map(|c| by_chunk.iter().map(|(_, e)| e[c].clone()).collect())
        .collect();
    std::mem::drop(by_chunk);
    let cached = loss_over(task, &parts, idx, weight)?;
    std::mem::drop(parts);
    // the loss's own parameters (none for MNR); the backbone's come from pass 2: the engines'
    // from their backward, the graph's from the surrogate's store (each store is dropped as
    // soon as its gradients are out)
    let params = crate::train::params::var_list(&task.varmap);
    let mut kept = ParamGrads::from_store(&params, cached.store);
    let per_thread = in_threads(n, |t| -> Result<(ParamGrads, ParamGrads)> {
        let (mut g, mut graph) = (bb.zero_grads()?, ParamGrads::default());
        for k in mine(t) {
            let (e, tape) = bb.embed(chunks[k], Some(k), true)?;
            if let Some(s) = surrogate(&e, &cached.emb_grads, k * size)? {
                let store = s.backward()?;
                if let Some(tape) = tape {
                    bb.backward(tape, &store, &mut g)?;
                }
                graph.add(ParamGrads::from_store(&params, store))?;
            }
        }
        Ok((bb.export(g)?, graph))
    })?;
    for (engine, graph) in per_thread {
        kept.add(engine)?;
        kept.add(graph)?;
    }
    Ok(Gradients {
        value: cached.value,
        parts: Vec::new(),
        grads: kept,
    })
}
