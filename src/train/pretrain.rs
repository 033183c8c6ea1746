//! Condenser pre-training as a TrainTask: whole-word-masked blocks through the backbone and the
//! head; loss = MLM through the head + MLM on the late layer (unless turned off), + coCondenser's
//! span contrast when asked. The output is the backbone as a plain HF BERT folder plus
//! condenser_head.safetensors (head layers and MLM head) that --continue-from reads back.
use super::corpus::Blocks;
use super::losses::{cross_entropy, span_contrastive};
use super::masking::{Masked, Masker};
use super::params::{self, load_trainable};
use super::spans::two_spans;
use super::task::{LossOutput, Score, TrainTask};
use crate::error::{Error, Result};
use crate::hash::mix64;
use crate::model::layers::condenser::Condenser;
use crate::model::folders::save::{save_condenser, CONDENSER_HEAD};
use crate::model::{Dropout, DropoutRates, ModelFolder, TokenBatch};
use candle_core::{Device, Tensor};
use candle_nn::VarMap;
use rand::SeedableRng;
use std::path::Path;

/// The head's tensors: they start fresh from `--model` and are read back by `--continue-from`.
const HEADS: [&str; 2] = ["c_head.", "cls.predictions."];

pub struct PretrainTask {
    pub model: Condenser,
    pub masker: Masker,
    pub blocks: Blocks,
    pub spec: PretrainSpec,
    pad: u32,
    device: Device,
    varmap: VarMap,
    folder: ModelFolder,
    fresh: Vec<String>,
}

/// The pre-training set-up besides the model and the corpus.
#[derive(Clone, Debug)]
pub struct PretrainSpec {
    pub head_layers: usize,
    /// Layer whose token states feed the head.
    pub skip_from: usize,
    pub late_mlm: bool,
    /// coCondenser: each block is a document giving two spans of this many body tokens, and the
    /// span contrastive loss joins the MLM losses.
    pub cocondenser: Option<usize>,
    pub seed: u64,
}

/// Where the head comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeadInit {
    /// A fresh head (BERT's init; the MLM head from the checkpoint when it has one).
    Fresh,
    /// The head saved beside the backbone (condenser_head.safetensors): continued training.
    Continue,
}

impl PretrainTask {
    /// The backbone from `init`; the head fresh or, continuing, from its saved file.
    pub fn new(
        init: &Path,
        head: HeadInit,
        blocks: Blocks,
        spec: &PretrainSpec,
        device: &Device,
    ) -> Result<PretrainTask> {
        let folder = ModelFolder::open(init)?;
        let tok = folder.tokenizer()?;
        let (extra, heads): (Vec<_>, &[&str]) = match head {
            HeadInit::Fresh => (Vec::new(), &HEADS),
            HeadInit::Continue => {
                let f = folder.transformer_dir.join(CONDENSER_HEAD);
                if !f.is_file() {
                    return Err(Error::file(
                        &f,
                        "--continue-from needs the Condenser head a pretrain run saves here; \
                         start a new head with --model",
                    ));
                }
                (vec![f], &[])
            }
        };
        let t = load_trainable(&folder.weights, &extra, heads, spec.seed, device, |vb| {
            Condenser::load(vb, &folder.config, spec.head_layers, spec.skip_from)
        })?;
        let pad = crate::model::Specials::of(&tok)?.pad;
        Ok(PretrainTask {
            model: t.model,
            masker: Masker::new(&tok)?,
            blocks,
            spec: spec.clone(),
            pad,
            device: device.clone(),
            varmap: t.varmap,
            folder,
            fresh: t.fresh,
        })
    }

    /// The rows of a micro-batch, masked: each block (coCondenser: its two spans, as rows
    /// [a1, b1, a2, b2, ...]) draws from its own RNG keyed by (micro-batch seed, block), so a
    /// resumed run or a batch split across threads masks exactly alike.
    fn rows(&self, idx: &[usize], seed: u64) -> Result<Vec<Masked>> {
        let mut out = Vec::with_capacity(idx.len() * 2);
        for &i in idx {
            let mut rng =
                rand::rngs::StdRng::seed_from_u64(mix64(seed ^ mix64(self.spec.seed ^ i as u64)));
            let block = self.blocks.get(i)?;
            let seqs = match self.spec.cocondenser {
                Some(span) => two_spans(&block, span, &self.masker, &mut rng).to_vec(),
                None => vec![block],
            };
            for s in &seqs {
                out.push(self.masker.mask(s, &mut rng));
            }
        }
        Ok(out)
    }
}

impl TrainTask for PretrainTask {
    fn set_precision(&mut self, p: crate::model::kernels::precision::Precision) -> Result<()> {
        self.model.set_precision(p)?;
        Ok(())
    }

    fn num_examples(&self) -> usize {
        self.blocks.len
    }

    /// MLM losses are means over masked tokens: a shard weighs its masked-token count. The span
    /// contrast takes its negatives from the whole batch, so coCondenser is never split.
    fn split_weight(&self, idx: &[usize], seed: u64) -> Option<f64> {
        if self.spec.cocondenser.is_some() {
            return None;
        }
        let rows = self.rows(idx, seed).ok()?;
        Some(rows.iter().map(|m| m.positions.len()).sum::<usize>() as f64)
    }

    fn loss(&self, idx: &[usize], seed: u64, drop: Option<&Dropout>) -> Result<LossOutput> {
        let rows = self.rows(idx, seed)?;
        let width = rows.iter().map(|m| m.input.len()).max().unwrap_or(1);
        let mut positions = Vec::new();
        let mut targets = Vec::new();
        for (r, m) in rows.iter().enumerate() {
            positions.extend(m.positions.iter().map(|&p| (r * width + p) as u32));
            targets.extend_from_slice(&m.targets);
        }
        let dev = &self.device;
        let refs: Vec<&[u32]> = rows.iter().map(|m| m.input.as_slice()).collect();
        let batch = TokenBatch::new(&refs, None, self.pad, dev)?;
        let n = positions.len();
        let pos = Tensor::from_vec(positions, n, dev)?;
        let tgt = Tensor::from_vec(targets, n, dev)?;
        let out = self
            .model
            .forward_t(&batch, &pos, self.spec.late_mlm, drop)?;
        let head = cross_entropy(&out.head_logits, &tgt)?;
        let mut total = head.clone();
        let mut parts = vec![("head_mlm", head)];
        if let Some(l) = &out.late_logits {
            let late = cross_entropy(l, &tgt)?;
            total = (total + &late)?;
            parts.push(("late_mlm", late));
        }
        if self.spec.cocondenser.is_some() {
            let co = span_contrastive(&out.cls)?;
            total = (total + &co)?;
            parts.push(("contrastive", co));
        }
        Ok(LossOutput { total, parts })
    }

    fn key(&self) -> super::TaskKey {
        let s = &self.spec;
        super::TaskKey {
            // the objective: the head's shape and the losses it trains
            loss: format!(
                "condenser head_layers={} skip_from={} late_mlm={} cocondenser={:?}",
                s.head_layers, s.skip_from, s.late_mlm, s.cocondenser
            ),
            data: self.blocks.key.clone(),
        }
    }

    fn dropout_rates(&self) -> DropoutRates {
        self.folder.config.dropout_rates()
    }

    fn evaluate(&self) -> Result<Option<Score>> {
        Ok(None)
    }

    fn varmap(&self) -> &VarMap {
        &self.varmap
    }

    fn fresh(&self) -> &[String] {
        &self.fresh
    }

    fn save(&self, dir: &Path) -> Result<()> {
        save_condenser(&self.folder, &params::named(&self.varmap), dir)
    }
}
