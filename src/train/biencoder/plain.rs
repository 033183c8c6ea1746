//! A bi-encoder step over any backbone (backbone.rs), the batch embedded at once. Losses with
//! in-batch negatives couple the batch, so the trainer cannot split it into independent shards;
//! the step splits the work instead: each of the backbone's threads embeds a part of the batch
//! (serial BLAS), the loss runs once over every part's embeddings, and each thread runs its
//! part's backward into its own gradients, summed at the end. The loss's own parameters (a
//! classifier's) and, on candle's graph, the backbone's come from the loss's store.
use super::task::BiEncoderTask;
use crate::error::Result;
use crate::model::engine::in_threads;
use crate::train::backbone::Backbone;
use crate::train::grads::ParamGrads;
use crate::train::params;
use crate::train::task::Gradients;
use candle_core::Tensor;
use std::sync::Mutex;

/// Rows `idx` in at most `n` contiguous parts.
pub fn parts(idx: &[usize], n: usize) -> Vec<&[usize]> {
    idx.chunks(idx.len().div_ceil(n.max(1)).max(1)).collect()
}

/// The loss over rows `idx` times `weight`, and its gradients.
pub(super) fn gradients<B: Backbone>(
    task: &BiEncoderTask,
    bb: &B,
    idx: &[usize],
    weight: f64,
) -> Result<Gradients> {
    let parts = parts(idx, bb.threads());
    let n = parts.len();
    let embedded = in_threads(n, |p| bb.embed(parts[p], None, true))?;
    let columns = task.data.texts.len();
    let emb: Vec<Tensor> = (0..columns)
        .map(|c| Tensor::cat(&embedded.iter().map(|e| &e.0[c]).collect::<Vec<_>>(), 0))
        .collect::<candle_core::Result<_>>()?;
    let (loss, value) = task.weighted_loss(&emb, idx, weight)?;
    let store = loss.backward()?;
    let tapes: Vec<Mutex<Option<B::Tape>>> =
        embedded.into_iter().map(|(_, t)| Mutex::new(t)).collect();
    let per_thread = in_threads(n, |p| -> Result<ParamGrads> {
        let mut g = bb.zero_grads()?;
        let tape = tapes[p]
            .lock()
            .unwrap()
            .take()
            .expect("a kept tape, each part once");
        bb.backward(tape, &store, &mut g)?;
        bb.export(g)
    })?;
    let mut grads = ParamGrads::from_store(&params::var_list(&task.varmap), store);
    for g in per_thread {
        grads.add(g)?;
    }
    Ok(Gradients {
        value,
        parts: Vec::new(),
        grads,
    })
}
