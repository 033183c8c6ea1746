//! What every loss is to the trainer: its columns and target (`LossSpec`, the registry's entry),
//! how it is built (`LossContext`), and the forward it runs (`Loss`).
use crate::data::ColumnSpec;
use crate::model::Linear;
use candle_core::{Result, Tensor};
use candle_nn::VarBuilder;

/// What a loss reads beside its text columns: one value per row, in the last column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// Nothing (in-batch ranking, triplets).
    None,
    /// A float label: a similarity score, a teacher's margin.
    Score,
    /// A class id below the head's label count.
    Class,
    /// A teacher embedding of the encoder's dimension.
    Vector,
    /// No column: the trainer passes each row's first two texts (anchor, positive) as ids local
    /// to the batch, (b, 2) u32, equal ids for equal texts, so that a loss can tell which rows
    /// repeat a text.
    TextIds,
}

impl Target {
    /// Whether the target is read from the data's last column.
    pub fn has_column(self) -> bool {
        matches!(self, Target::Score | Target::Class | Target::Vector)
    }
}

/// An in-batch ranking loss's form, defined once beside the device's loss that runs it
/// (model/engine/gpu/ranking.rs) and run here in candle (functional.rs's `in_batch_ranking`).
pub use crate::model::engine::gpu::Ranking;

impl Ranking {
    /// The loss over the columns' embeddings `emb` (anchors, then candidates' columns), with
    /// `exclude` added to the scores (functional.rs's `in_batch_ranking`).
    pub fn forward(&self, emb: &[Tensor], exclude: Option<&Tensor>) -> Result<Tensor> {
        let candidates = Tensor::cat(&emb[1..], 0)?;
        super::in_batch_ranking(&emb[0], &candidates, self.scale, self.cosine, exclude)
    }
}

/// What a loss gets to build itself: its trainable parameters go under `vb`.
pub struct LossContext<'a> {
    pub vb: VarBuilder<'a>,
    /// The encoder's embedding dimension.
    pub dim: usize,
    /// Classes of a classification head.
    pub num_labels: usize,
}

/// A loss over one batch's embeddings.
pub trait Loss: Send + Sync {
    /// `emb[c]` is text column c's (b, dim) embeddings; `target` the rows' (b,) scores or class
    /// ids (u32), or (b, dim) vectors, as the spec's `Target` says.
    fn forward(&self, emb: &[Tensor], target: Option<&Tensor>) -> Result<Tensor>;

    /// A trainable head kept beside the encoder (SoftmaxLoss' classifier): its name (the file
    /// `<name>.safetensors` and the variables' prefix) and layer.
    fn head(&self) -> Option<(&'static str, &Linear)> {
        None
    }
}

/// The rows' targets of a loss that needs them, or one error saying which loss lacked what (a
/// caller that builds a batch without its target column); every loss reads its target this way.
pub fn required<'a>(target: Option<&'a Tensor>, spec: &LossSpec) -> Result<&'a Tensor> {
    target.ok_or_else(|| {
        let what = match spec.target {
            Target::Score => "a score per row",
            Target::Class => "a class id per row",
            Target::Vector => "a teacher vector per row",
            Target::TextIds => "its rows' text ids (from the trainer, not a column)",
            Target::None => "no target",
        };
        candle_core::Error::Msg(format!(
            "loss {} needs {what} (its last column, {}), and the batch has none",
            spec.name, spec.columns
        ))
    })
}

/// A loss as the registry lists it.
#[derive(Clone, Copy)]
pub struct LossSpec {
    /// The `--loss` value.
    pub name: &'static str,
    /// sentence-transformers' name for it and what it does, for `--help`.
    pub help: &'static str,
    /// Default columns: texts, then the target's column where there is one.
    pub columns: &'static str,
    /// Text columns it needs; `more_texts`: any number more may follow (hard negatives).
    pub texts: usize,
    pub more_texts: bool,
    pub target: Target,
    /// The values a `Target::Score` may take (a cosine reaches only [-1, 1], so a 0-5 STS label
    /// left unnormalised would train toward the impossible); None: any finite value.
    pub score_range: Option<(f64, f64)>,
    /// The loss is a mean of independent per-example terms, so a batch may be split across
    /// threads (not so for in-batch negatives).
    pub per_example: bool,
    /// Embed in mini-batches without a graph and backpropagate the loss's gradient through
    /// each (GradCache): large batches in bounded memory.
    pub cached: bool,
    /// Some for an in-batch ranking loss: its form, for an engine that runs it itself.
    pub ranking: Option<Ranking>,
    pub build: fn(&LossContext) -> Result<Box<dyn Loss>>,
}

impl std::fmt::Debug for LossSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.name)
    }
}

impl PartialEq for LossSpec {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl LossSpec {
    /// What most losses are: two text columns, no target, a per-example mean, not cached. A loss
    /// file states its name, help, columns and build, and only what differs from this
    /// (`..LossSpec::BASE`).
    pub const BASE: LossSpec = LossSpec {
        name: "",
        help: "",
        columns: "",
        texts: 2,
        more_texts: false,
        target: Target::None,
        score_range: None,
        per_example: true,
        cached: false,
        ranking: None,
        build: |_| Err(candle_core::Error::Msg("a loss spec without build".into())),
    };

    pub fn default_columns(&self) -> ColumnSpec {
        ColumnSpec::of(self.columns)
    }
}
