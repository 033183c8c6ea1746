//! The GPU engine (model/engine/gpu) as a bi-encoder's backbone (backbone.rs): every column's
//! rows packed into one forward, each named by (example, column) as the CPU engine names them (so
//! the dropout masks are the CPU engine's). One forward instead of one a column: on a GPU a
//! step's time goes to launches, and a column is as many as the batch.
use super::task::BiEncoderTask;
use crate::error::Result;
use crate::model::engine::gpu::Training;
use crate::model::engine::gpu::{Addr, Device, DevicePooling, Leaf, PooledLeaf, Shape, Stack};
use crate::model::Dropout;
use crate::train::backbone::Backbone;
use crate::train::grads::ParamGrads;
use crate::train::task::dropout_key;
use candle_core::backprop::GradStore;
use candle_core::Tensor;
use std::sync::Mutex;

/// The GPU engine as a backbone (backbone.rs) for a loss in candle: every column's rows packed
/// into one forward (its tape in the stack until the next forward), pooled on the device into a
/// leaf of n rows (`PooledLeaf`) where the device runs the pooling, else pooled by candle over
/// the padded rows (max). One thread: the GPU is one stream.
pub(super) struct OnDevice<'a, D: Device> {
    task: &'a BiEncoderTask,
    gpu: Mutex<&'a mut Training<D>>,
    drop: Option<&'a Dropout>,
    pooling: Option<DevicePooling>,
}

/// What an `OnDevice` forward keeps for its backward.
pub(super) enum Tape {
    Padded(Leaf),
    Pooled(PooledLeaf),
}

impl<'a, D: Device> OnDevice<'a, D> {
    pub(super) fn new(
        task: &'a BiEncoderTask,
        gpu: &'a mut Training<D>,
        drop: Option<&'a Dropout>,
    ) -> Self {
        OnDevice {
            task,
            gpu: Mutex::new(gpu),
            drop,
            pooling: DevicePooling::of(task.enc.pooling),
        }
    }
}

impl<D: Device> Backbone for OnDevice<'_, D>
where
    Training<D>: Send,
{
    type Tape = Tape;
    type Grads = ();

    fn embed(
        &self,
        rows: &[usize],
        _: Option<usize>,
        tape: bool,
    ) -> Result<(Vec<Tensor>, Option<Tape>)> {
        let (task, b) = (self.task, rows.len());
        let mut gpu = self.gpu.lock().unwrap_or_else(|e| e.into_inner());
        let (emb, kept) = match self.pooling {
            Some(pooling) => {
                let (at, shape) = embed_on_device(task, &mut gpu, pooling, rows, self.drop)?;
                let on = task.enc.bert.embeddings.word.embeddings().device().clone();
                let (n, width) = (shape.rows, shape.width);
                let leaf = PooledLeaf::of(gpu.stack.device(), at, (n, width), &on)?;
                let emb = (0..task.data.texts.len())
                    .map(|c| leaf.emb.as_tensor().narrow(0, c * b, b))
                    .collect::<candle_core::Result<Vec<_>>>()?;
                (emb, Tape::Pooled(leaf))
            }
            None => {
                let (leaf, emb) = embed(task, &mut gpu.stack, rows, self.drop)?;
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
        let mut guard = self.gpu.lock().unwrap_or_else(|e| e.into_inner());
        let gpu = &mut **guard;
        let bert = &self.task.enc.bert;
        match tape {
            Tape::Padded(leaf) => {
                leaf.backward(&mut gpu.stack, bert, store, self.drop, &gpu.grads)?
            }
            Tape::Pooled(leaf) => {
                let head = gpu.head.as_ref().expect("made by embed_on_device");
                leaf.backward(&mut gpu.stack, head, (bert, store), self.drop, &gpu.grads)?
            }
        }
        Ok(())
    }

    /// The backbone's gradients as views of the GPU's arena (held by the result's lease).
    fn export(&self, _: ()) -> Result<ParamGrads> {
        let gpu = self.gpu.lock().unwrap_or_else(|e| e.into_inner());
        Ok(ParamGrads::of_arena(gpu.grads.export(&self.task.enc.bert)?))
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
) -> Result<(Leaf, Vec<Tensor>)> {
    let (seqs, keys) = packed_columns(task, idx);
    let bert = &task.enc.bert;
    let on = bert.embeddings.word.embeddings().device().clone();
    let leaf = Leaf::forward(stack, bert, &seqs, None, &keys, drop, &on)?;
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
pub(super) fn embed_on_device<D: Device>(
    task: &BiEncoderTask,
    gpu: &mut Training<D>,
    pooling: DevicePooling,
    idx: &[usize],
    drop: Option<&Dropout>,
) -> Result<(Addr, Shape)> {
    let (seqs, keys) = packed_columns(task, idx);
    let (bert, normalize) = (&task.enc.bert, task.enc.normalize);
    let (emb, width) = gpu.embed_pooled(bert, &seqs, None, &keys, drop, pooling, normalize)?;
    let shape = Shape {
        rows: seqs.len(),
        anchors: idx.len(),
        width,
    };
    Ok((emb, shape))
}
