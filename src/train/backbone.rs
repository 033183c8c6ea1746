//! What a training step asks of the backbone that runs BERT for it (candle's graph, the CPU
//! engine, the GPU engine): rows embedded, with a tape kept where a gradient will follow, and the
//! backward from the gradient the loss left in candle's store. Each task's step is written once
//! over it (the bi-encoder's plain step and GradCache: biencoder/plain.rs, gradcache.rs; the
//! cross-encoder's: cross_encoder.rs); an engine is one implementation, not another step.
use crate::error::Result;
use crate::train::grads::ParamGrads;
use candle_core::backprop::GradStore;
use candle_core::Tensor;

pub(crate) trait Backbone: Sync {
    /// What an embedding pass keeps for its backward.
    type Tape: Send;
    /// One thread's gradient sum.
    type Grads;

    /// Threads a step's work is split across, each summing into its own gradients (one: the
    /// graph, a GPU's one stream, a loss the trainer splits itself).
    fn threads(&self) -> usize {
        1
    }

    /// The embeddings of every column of rows `rows` (a cross-encoder: one, the pairs' `[CLS]`
    /// states), and their tape when `tape`. `chunk`: GradCache's mini-batch these rows are
    /// (None: the step's own rows, or a thread's part).
    fn embed(
        &self,
        rows: &[usize],
        chunk: Option<usize>,
        tape: bool,
    ) -> Result<(Vec<Tensor>, Option<Self::Tape>)>;

    fn zero_grads(&self) -> Result<Self::Grads>;

    /// The backward of `tape` from its embeddings' gradients in `store`, summed into `g`.
    fn backward(&self, tape: Self::Tape, store: &GradStore, g: &mut Self::Grads) -> Result<()>;

    /// A thread's sum as the step keeps gradients.
    fn export(&self, g: Self::Grads) -> Result<ParamGrads>;
}
