//! A bi-encoder's backbones (train/backbone.rs): candle's graph and the CPU engine here, the GPU
//! engine in gpu_backbone.rs. The step is written once over them, whole (plain.rs) or by
//! GradCache's two passes (gradcache.rs); a backbone is one implementation, not another step.
use super::task::BiEncoderTask;
use crate::error::Result;
use crate::model::engine::cpu::{self, Leaf};
use crate::model::Dropout;
use crate::train::backbone::Backbone;
use crate::train::grads::ParamGrads;
use candle_core::backprop::GradStore;
use candle_core::Tensor;

/// candle's graph: the embeddings carry their graph, so candle's backward of the loss (or of
/// GradCache's surrogate) reaches the parameters itself and the step reads them from its store;
/// there is no tape of the backbone's own.
pub(super) struct Graph<'a> {
    pub task: &'a BiEncoderTask,
    pub drop: Option<&'a Dropout>,
}

impl Backbone for Graph<'_> {
    type Tape = ();
    type Grads = ();

    fn embed(
        &self,
        rows: &[usize],
        chunk: Option<usize>,
        tape: bool,
    ) -> Result<(Vec<Tensor>, Option<()>)> {
        // GradCache's mini-batch k draws from a fresh fork k stream in both passes, so the
        // second sees the first's masks (the engines key masks by example and column instead)
        let stream = chunk.and_then(|k| self.drop.map(|d| d.fork(k as u64)));
        let emb = self
            .task
            .embed_columns(rows, stream.as_ref().or(self.drop))?;
        if tape {
            return Ok((emb, Some(())));
        }
        // detach drops the rows' graph as soon as their embeddings are out
        Ok((emb.iter().map(Tensor::detach).collect(), None))
    }

    fn zero_grads(&self) -> Result<()> {
        Ok(())
    }

    fn backward(&self, _: (), _: &GradStore, _: &mut ()) -> Result<()> {
        Ok(())
    }

    fn export(&self, _: ()) -> Result<ParamGrads> {
        Ok(ParamGrads::default())
    }
}

/// The CPU engine: each column embedded by its own forward (short queries are not padded to
/// their documents' length) with its tape, a `Leaf`; each thread's backward sums into its own
/// gradient buffers. Masks are keyed by (example, column), so any split draws the whole
/// batch's.
pub(super) struct CpuEngine<'a> {
    pub task: &'a BiEncoderTask,
    pub eng: &'a cpu::Stack<'a>,
    pub drop: Option<&'a Dropout>,
}

impl Backbone for CpuEngine<'_> {
    type Tape = Vec<Leaf>;
    type Grads = cpu::Grads;

    /// A per-example loss is split by the trainer already: its step runs whole (one split,
    /// never threads x threads).
    fn threads(&self) -> usize {
        match self.task.spec.per_example {
            true => 1,
            false => self.task.threads,
        }
    }

    fn embed(
        &self,
        rows: &[usize],
        _: Option<usize>,
        tape: bool,
    ) -> Result<(Vec<Tensor>, Option<Vec<Leaf>>)> {
        let mut emb = Vec::with_capacity(self.task.data.texts.len());
        let mut leaves = Vec::new();
        for c in 0..self.task.data.texts.len() {
            let (e, leaf) = self.task.embed_engine(self.eng, c, rows, self.drop, tape)?;
            emb.push(e);
            leaves.extend(leaf);
        }
        Ok((emb, tape.then_some(leaves)))
    }

    fn zero_grads(&self) -> Result<Self::Grads> {
        Ok(self.eng.zero_grads()?)
    }

    fn backward(&self, tape: Vec<Leaf>, store: &GradStore, g: &mut Self::Grads) -> Result<()> {
        for leaf in tape {
            leaf.backward(self.eng, store, self.drop, g)?;
        }
        Ok(())
    }

    fn export(&self, g: Self::Grads) -> Result<ParamGrads> {
        Ok(ParamGrads::of_pairs(self.eng.export(g)?))
    }
}
