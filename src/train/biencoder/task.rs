//! The bi-encoder as a training task: the encoder, its loss and data, and how it embeds a batch.
use super::data::BiData;
use crate::error::{Error, Result};
use crate::eval::Evaluator;
use crate::model::engine::cpu::{self, pad, Leaf};
use crate::model::engine::gpu::{Cuda, Training};
use crate::model::{Bert, Dropout, Linear, ModelFolder, Pooling, SentenceEncoder};
use crate::train::losses::{Loss, LossContext, LossSpec, Target};
use crate::train::params::{self, load_trainable};
use crate::train::task::dropout_key;
use candle_core::{Device, Tensor};
use candle_nn::VarMap;
use std::path::Path;

/// A loss's trainable parameters live under this prefix; they alone may start fresh.
pub(super) const HEAD_PREFIX: &str = "head";

/// How the bi-encoder is set up besides its starting folder and loss.
#[derive(Clone, Debug)]
pub struct BiEncoderOptions {
    /// The pooling to train with (default: the starting folder's; mean for a plain BERT).
    pub pooling: Option<Pooling>,
    /// Tokens per text in training.
    pub max_seq_length: usize,
    /// The max_seq_length the saved model declares (its inference truncation): the user's
    /// --max-seq-length, or None to keep the starting folder's (never the training default).
    pub saved_max_seq_length: Option<usize>,
    /// Classes of a classification head (SoftmaxLoss).
    pub num_labels: usize,
    pub seed: u64,
    pub device: Device,
    /// Rows embedded at once by a cached loss (GradCache); None: its default. Refused for other
    /// losses, which embed the whole batch at once.
    pub mini_batch_size: Option<usize>,
}

/// sentence-transformers' CachedMultipleNegativesRankingLoss default.
pub const DEFAULT_MINI_BATCH: usize = 32;

pub struct BiEncoderTask {
    /// The max_seq_length written into the saved folder (`BiEncoderOptions`).
    pub(super) saved_len: usize,
    pub enc: SentenceEncoder,
    pub spec: &'static LossSpec,
    pub loss: Box<dyn Loss>,
    pub data: BiData,
    pub dev: Option<Box<dyn Evaluator>>,
    pub(super) varmap: VarMap,
    pub(super) folder: ModelFolder,
    pub(super) fresh: Vec<String>,
    /// Some for a cached loss: the GradCache mini-batch.
    pub(super) mini_batch: Option<usize>,
    /// CPU threads a batch's forward and backward are split across when the loss couples the
    /// batch (the trainer splits per-example losses itself).
    pub(super) threads: usize,
    /// What was changed of what was asked (a length cut to the model's positions).
    pub(super) notes: Vec<String>,
    /// The GPU engine and its gradient arena, made at the first step on a GPU and kept (their
    /// buffers are the point: allocated once, reused every step).
    pub(super) gpu: std::sync::Mutex<Option<Training<Cuda>>>,
}

impl BiEncoderTask {
    /// The encoder from any BERT folder: HF, sentence-transformers, a cross-encoder or a Condenser
    /// checkpoint (only the BERT backbone is read; its heads are ignored).
    pub fn new(init: &Path, spec: &'static LossSpec, o: &BiEncoderOptions) -> Result<Self> {
        let mini_batch = match (spec.cached, o.mini_batch_size) {
            (true, m) => Some(m.unwrap_or(DEFAULT_MINI_BATCH)),
            (false, None) => None,
            (false, Some(_)) => {
                return Err(Error::msg(format!(
                    "--mini-batch-size applies to cached losses (cached-mnr); loss {} embeds the whole batch at once",
                    spec.name
                )))
            }
        };
        let folder = ModelFolder::open(init)?;
        let pooling = o.pooling.unwrap_or(folder.pooling);
        let pooling_note = o.pooling.is_none().then(|| folder.pooling_note()).flatten();
        let cfg = folder.config.clone();
        let head_prefix = format!("{HEAD_PREFIX}.");
        let t = load_trainable(
            &folder.weights,
            &[],
            &[&head_prefix],
            o.seed,
            &o.device,
            |vb| {
                let bert = Bert::load(vb.clone(), &cfg)?;
                let dim = cfg.hidden_size * pooling.modes();
                let cx = LossContext {
                    vb: vb.pp(HEAD_PREFIX),
                    dim,
                    num_labels: o.num_labels,
                };
                Ok((bert, (spec.build)(&cx)?))
            },
        )?;
        let (bert, loss) = t.model;
        let (max_len, note) = cfg.fit_length(o.max_seq_length);
        let saved_len = o
            .saved_max_seq_length
            .map(|m| m.min(max_len))
            .unwrap_or(folder.max_seq_length);
        let keeps = (saved_len != max_len).then(|| {
            format!(
                "training at {max_len} tokens a text; the saved model keeps its start's \
                 max_seq_length {saved_len} (give --max-seq-length to set both)"
            )
        });
        let enc = SentenceEncoder::new(
            bert,
            folder.tokenizer()?,
            pooling,
            folder.normalize,
            max_len,
            &o.device,
        )?;
        Ok(BiEncoderTask {
            enc,
            spec,
            loss,
            data: BiData::default(),
            dev: None,
            varmap: t.varmap,
            folder,
            fresh: t.fresh,
            mini_batch,
            threads: 1,
            notes: note.into_iter().chain(keeps).chain(pooling_note).collect(),
            saved_len,
            gpu: Default::default(),
        })
    }

    /// Embeddings (b, dim) of the rows `idx` of every text column, one forward pass per column
    /// (as sentence-transformers does): short queries are not padded to their documents' length.
    pub(super) fn embed_columns(
        &self,
        idx: &[usize],
        drop: Option<&Dropout>,
    ) -> Result<Vec<Tensor>> {
        self.data
            .texts
            .iter()
            .map(|col| {
                let seqs: Vec<&[u32]> = idx.iter().map(|&i| col[i].as_slice()).collect();
                Ok(self.enc.embed_t(&seqs, drop)?)
            })
            .collect()
    }

    /// The loss over the columns' embeddings `emb` of rows `idx`, scaled by `weight` (a split
    /// batch's share), and its value.
    pub(super) fn weighted_loss(
        &self,
        emb: &[Tensor],
        idx: &[usize],
        weight: f64,
    ) -> Result<(Tensor, f64)> {
        let loss = self.loss.forward(emb, self.target(idx)?.as_ref())?;
        let loss = if weight == 1.0 {
            loss
        } else {
            loss.affine(weight, 0.0)?
        };
        let value = loss.to_dtype(candle_core::DType::F64)?.to_scalar::<f64>()?;
        Ok((loss, value))
    }

    /// The rows `idx` of column `col`, tokenized.
    pub(super) fn column(&self, col: usize, idx: &[usize]) -> Vec<&[u32]> {
        idx.iter()
            .map(|&i| self.data.texts[col][i].as_slice())
            .collect()
    }

    /// One column's embeddings through the engine: with a kept tape (`Leaf`) when the gradient is
    /// wanted, else plain (no graph, no tape).
    pub(super) fn embed_engine(
        &self,
        eng: &cpu::Stack,
        col: usize,
        idx: &[usize],
        drop: Option<&Dropout>,
        keep: bool,
    ) -> Result<(Tensor, Option<Leaf>)> {
        let seqs = self.column(col, idx);
        let keys: Vec<u64> = idx.iter().map(|&i| dropout_key(i, col)).collect();
        if keep {
            let leaf = Leaf::forward(eng, &seqs, None, &keys, drop)?;
            Ok((
                self.enc.pool(leaf.states.as_tensor(), &leaf.mask)?,
                Some(leaf),
            ))
        } else {
            let fwd = eng.forward(&seqs, None, Some(&keys), drop, false)?;
            let (states, mask, _) = pad(&fwd)?;
            Ok((self.enc.pool(&states, &mask)?, None))
        }
    }

    /// The GradCache mini-batch of a cached loss.
    /// For in-batch-negative losses: (the most rows one text occurs in, the epoch's batches) when
    /// the first exceeds the second, so that some batch must repeat a text.
    pub fn unavoidable_repeats(&self, batch: usize) -> Option<(usize, usize)> {
        if self.spec.per_example {
            return None;
        }
        super::no_duplicates::unavoidable_repeats(&self.data.texts, batch)
    }

    pub fn mini_batch(&self) -> Option<usize> {
        self.mini_batch
    }

    /// The rows' targets as the loss wants them.
    pub(super) fn target(&self, idx: &[usize]) -> Result<Option<Tensor>> {
        if self.spec.target == Target::TextIds {
            return Ok(Some(self.text_ids(idx)?));
        }
        let d = self.data.target_dim;
        if self.spec.target == Target::None || d == 0 {
            return Ok(None);
        }
        let v: Vec<f32> = idx
            .iter()
            .flat_map(|&i| self.data.target[i * d..(i + 1) * d].iter().copied())
            .collect();
        let dev = &self.enc.device;
        Ok(Some(if d == 1 {
            Tensor::from_vec(v, idx.len(), dev)?
        } else {
            Tensor::from_vec(v, (idx.len(), d), dev)?
        }))
    }

    /// Rows `idx`'s anchor and positive as ids local to the batch, (b, 2) u32: equal token ids,
    /// equal id (one numbering for both columns, so a text in either matches).
    fn text_ids(&self, idx: &[usize]) -> Result<Tensor> {
        let v = self.text_id_values(idx);
        Ok(Tensor::from_vec(v, (idx.len(), 2), &self.enc.device)?)
    }

    /// `text_ids`' values, row-major.
    pub(super) fn text_id_values(&self, idx: &[usize]) -> Vec<u32> {
        let mut ids: crate::hash::FastMap<&[u32], u32> = Default::default();
        let mut v = Vec::with_capacity(idx.len() * 2);
        for &i in idx {
            for col in self.data.texts.iter().take(2) {
                let next = ids.len() as u32;
                v.push(*ids.entry(col[i].as_slice()).or_insert(next));
            }
        }
        v
    }

    /// The encoder and head over untracked copies of the weights, for evaluation.
    pub(super) fn frozen(&self) -> Result<(SentenceEncoder, Option<Linear>)> {
        let vb = params::frozen(&self.varmap, &self.enc.device);
        let bert = Bert::load(vb.clone(), &self.folder.config)?;
        let head = match self.loss.head() {
            Some((name, h)) => {
                let (out, inp) = h.weight.dims2()?;
                Some(Linear::load(vb.pp(HEAD_PREFIX).pp(name), inp, out)?)
            }
            None => None,
        };
        Ok((self.enc.with_bert(bert), head))
    }
}
