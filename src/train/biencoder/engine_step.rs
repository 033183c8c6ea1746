//! A bi-encoder step through the engine: each column embedded with its tape (a `Leaf`), the loss
//! in candle over all embeddings, the engine's backward per column. Losses with in-batch
//! negatives couple the batch, so the trainer cannot split it into independent shards; the step
//! splits the work instead: each thread embeds a part of the batch (serial BLAS), the loss runs
//! once over every part's embeddings, and each thread runs its part's backward into its own
//! gradient buffers, summed at the end. A per-example loss is split by the trainer already: its
//! step runs whole (one split, never threads x threads). Masks are keyed by (example, column),
//! so the parts draw what the whole batch would.
use super::task::BiEncoderTask;
use crate::error::Result;
use crate::model::engine::{in_threads, Engine, Leaf};
use crate::model::Dropout;
use crate::train::grads::ParamGrads;
use crate::train::params;
use crate::train::task::Gradients;
use candle_core::Tensor;

/// Rows `idx` in at most `n` contiguous parts.
pub fn parts(idx: &[usize], n: usize) -> Vec<&[usize]> {
    idx.chunks(idx.len().div_ceil(n.max(1)).max(1)).collect()
}

pub fn gradients(
    task: &BiEncoderTask,
    eng: &Engine,
    idx: &[usize],
    drop: Option<&Dropout>,
    weight: f64,
) -> Result<Gradients> {
    let threads = if task.spec.per_example {
        1
    } else {
        task.threads
    };
    let parts = parts(idx, threads);
    let columns = task.data.texts.len();
    let n = parts.len();
    // each part: its columns' leaves and pooled embeddings
    let embedded = in_threads(n, |p| -> Result<Vec<(Tensor, Leaf)>> {
        let mut out = Vec::with_capacity(columns);
        for c in 0..columns {
            let (e, leaf) = task.embed_engine(eng, c, parts[p], drop, true)?;
            out.push((e, leaf.expect("a kept tape")));
        }
        Ok(out)
    })?;
    let emb: Vec<Tensor> = (0..columns)
        .map(|c| {
            Tensor::cat(
                &embedded.iter().map(|part| &part[c].0).collect::<Vec<_>>(),
                0,
            )
        })
        .collect::<candle_core::Result<_>>()?;
    let (loss, value) = task.weighted_loss(&emb, idx, weight)?;
    let store = loss.backward()?;
    let leaves: Vec<Vec<Leaf>> = embedded
        .into_iter()
        .map(|part| part.into_iter().map(|(_, l)| l).collect())
        .collect();
    let slots: Vec<std::sync::Mutex<Option<Vec<Leaf>>>> = leaves
        .into_iter()
        .map(|l| std::sync::Mutex::new(Some(l)))
        .collect();
    let per_thread = in_threads(n, |p| -> Result<Vec<(Tensor, Tensor)>> {
        let mut g = eng.zero_grads()?;
        let part = slots[p].lock().unwrap().take().expect("each part once");
        for leaf in part {
            leaf.backward(eng, &store, drop, &mut g)?;
        }
        Ok(eng.export(g)?)
    })?;
    let mut grads = ParamGrads::from_store(&params::var_list(&task.varmap), store);
    for g in per_thread {
        grads.add_pairs(g)?;
    }
    Ok(Gradients {
        value,
        parts: Vec::new(),
        grads,
    })
}
