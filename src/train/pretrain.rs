//! Condenser pre-training as a TrainTask: whole-word-masked blocks through the backbone and the
//! head; loss = MLM through the head + MLM on the late layer (unless turned off), + coCondenser's
//! span contrast when asked. The output is the backbone as a plain HF BERT folder plus
//! condenser_head.safetensors (head layers and MLM head) that --continue-from reads back.
use super::corpus::Blocks;
use super::grads::ParamGrads;
use super::losses::{cross_entropy, span_contrastive};
use super::masking::{Masked, Masker};
use super::params::{self, load_trainable};
use super::spans::two_spans;
use super::task::{dropout_key, Gradients, LossOutput, Score, TrainTask};
use crate::error::{Error, Result};
use crate::hash::mix64;
use crate::model::engine::{cpu, Backend, Takes};
use crate::model::folders::save::{save_condenser, CONDENSER_HEAD};
use crate::model::layers::condenser::Condenser;
use crate::model::layers::condenser::CondenserOutput;
use crate::model::{Dropout, DropoutRates, ModelFolder, TokenBatch};
use candle_core::{Device, Tensor, Var};
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
    /// The head's MLM loss (Condenser); false: plain MLM on the last layer, no head (the
    /// control: more pre-training alone, the same text and steps).
    pub head_mlm: bool,
    pub late_mlm: bool,
    /// coCondenser: each block is a document giving two spans of this many body tokens, and the
    /// span contrastive loss joins the MLM losses.
    pub cocondenser: Option<usize>,
    /// Train the head alone, the backbone (word embeddings, so the tied MLM decoder, included)
    /// left as it is: a fresh head's warm-up, so that the backbone does not serve a head that
    /// has not yet learnt the vocabulary (issue 34: continued pre-training from a sentence
    /// encoder with a fresh head hurt its retrieval).
    pub freeze_backbone: bool,
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
        let head_layers = if spec.head_mlm { spec.head_layers } else { 0 };
        let mut t = load_trainable(&folder.weights, &extra, heads, spec.seed, device, |vb| {
            Condenser::load(vb, &folder.config, head_layers, spec.skip_from)
        })?;
        t.model.head_mlm = spec.head_mlm;
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

    /// Where the MLM head came from and which losses it serves: a masked-LM checkpoint's own
    /// head is kept (only the Condenser head's layers start fresh); a sentence encoder has none.
    pub fn mlm_head_note(&self, head: HeadInit) -> String {
        let fresh = self.fresh.iter().any(|n| n.starts_with("cls.predictions."));
        let from = match (head, fresh) {
            (HeadInit::Continue, _) => "read back from the Condenser folder",
            (HeadInit::Fresh, false) => "the starting checkpoint's own",
            (HeadInit::Fresh, true) => "started fresh (the starting folder has no MLM head)",
        };
        let serves = match (self.spec.head_mlm, self.spec.late_mlm) {
            (true, true) => "both MLM losses (the head's and the last layer's)",
            (true, false) => "the head's MLM loss",
            _ => "the last layer's MLM loss",
        };
        let layers = match (self.spec.head_mlm, head) {
            (false, _) => "; no Condenser head (plain MLM)",
            (true, HeadInit::Continue) => "; the Condenser head's layers read back",
            (true, HeadInit::Fresh) => "; the Condenser head's layers start fresh",
        };
        format!("MLM head (cls.predictions): {from}, serving {serves}{layers}")
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

    /// The MLM losses (and coCondenser's span contrast) of a forward's logits.
    fn losses(&self, out: &CondenserOutput, tgt: &Tensor) -> Result<LossOutput> {
        let mut parts = Vec::new();
        if let Some(h) = &out.head_logits {
            parts.push(("head_mlm", cross_entropy(h, tgt)?));
        }
        if let Some(l) = &out.late_logits {
            parts.push(("late_mlm", cross_entropy(l, tgt)?));
        }
        if self.spec.cocondenser.is_some() {
            parts.push(("contrastive", span_contrastive(&out.cls)?));
        }
        let mut total = parts
            .first()
            .map(|(_, t)| t.clone())
            .ok_or_else(|| Error::msg("pre-training with no loss: the head's or the late MLM"))?;
        for (_, t) in &parts[1..] {
            total = (total + t)?;
        }
        Ok(LossOutput { total, parts })
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

    fn backend(&self) -> Backend {
        let m = &self.model;
        let head: &[crate::model::BertLayer] = if m.head_mlm { &m.head } else { &[] };
        Backend::of(&m.bert, head, Takes::CpuOnly)
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
        self.losses(&out, &tgt)
    }

    /// Through the engine where it applies: the backbone (tape kept), the head layers on the last
    /// `[CLS]` and layer `skip_from`'s tokens, the MLM head and losses in candle on leaves of the
    /// head's and the last layer's rows; then the head's backward, whose input gradient splits
    /// into the last layer's `[CLS]` rows and layer `skip_from`'s other rows, and the backbone's.
    fn gradients(
        &self,
        idx: &[usize],
        seed: u64,
        drop: Option<&Dropout>,
        weight: f64,
    ) -> Result<Gradients> {
        let params = params::var_list(&self.varmap);
        let m = &self.model;
        let fallback = || super::task::backward(self.loss(idx, seed, drop)?, weight, &params);
        let Some(body) = self.backend().cpu_engine(&m.bert) else {
            return fallback();
        };
        // plain MLM has no head to run
        let head = match m.head_mlm {
            true => match cpu::Stack::for_layers(&m.head, m.bert.precision()) {
                Some(h) => Some(h),
                None => return fallback(),
            },
            false => None,
        };
        let rows = self.rows(idx, seed)?;
        let refs: Vec<&[u32]> = rows.iter().map(|m| m.input.as_slice()).collect();
        // each row's dropout identity: its block, and its span under coCondenser
        let per = rows.len() / idx.len().max(1);
        let keys: Vec<u64> = (0..rows.len())
            .map(|r| dropout_key(idx[r / per.max(1)], r % per.max(1)))
            .collect();
        let fwd = body.forward(&refs, None, Some(&keys), drop, true)?;
        let p = fwd.packed.clone();
        let h = fwd.hidden.len() / p.rows().max(1);
        let (mut positions, mut targets) = (Vec::new(), Vec::new());
        for (r, mk) in rows.iter().enumerate() {
            positions.extend(mk.positions.iter().map(|&q| (p.offsets()[r] + q) as u32));
            targets.extend_from_slice(&mk.targets);
        }
        let head_drop = drop.map(|d| d.fork(u64::MAX));
        let hfwd = match &head {
            Some(head) => {
                // the head's input: each item's last-layer [CLS], then layer skip_from's tokens
                let early = fwd.state(m.skip_from).expect("the tape was kept");
                let mut hin = early.to_vec();
                for &off in p.offsets() {
                    hin[off * h..(off + 1) * h]
                        .copy_from_slice(&fwd.hidden[off * h..(off + 1) * h]);
                }
                Some(head.forward_rows(hin, p.clone(), head_drop.as_ref(), true)?)
            }
            None => None,
        };
        let dev = &self.device;
        let leaf = |v: &[f32]| Var::from_tensor(&Tensor::from_vec(v.to_vec(), (p.rows(), h), dev)?);
        let hv = hfwd.as_ref().map(|f| leaf(&f.hidden)).transpose()?;
        let lv = leaf(&fwd.hidden)?;
        let n = positions.len();
        let pos = Tensor::from_vec(positions, n, dev)?;
        let tgt = Tensor::from_vec(targets, n, dev)?;
        let late = if self.spec.late_mlm {
            Some(lv.as_tensor().index_select(&pos, 0)?)
        } else {
            None
        };
        let head_sel = hv
            .as_ref()
            .map(|v| v.as_tensor().index_select(&pos, 0))
            .transpose()?;
        let (head_logits, late_logits) = m.mlm_logits(head_sel.as_ref(), late.as_ref())?;
        let offs: Vec<u32> = p.offsets().iter().map(|&o| o as u32).collect();
        let cls = lv
            .as_tensor()
            .index_select(&Tensor::from_vec(offs, p.lens().len(), dev)?, 0)?;
        let out = CondenserOutput {
            head_logits,
            late_logits,
            cls,
        };
        let (mut g, store) = super::task::backward_store(self.losses(&out, &tgt)?, weight)?;
        let grad_of = |v: &Var| -> Result<Vec<f32>> {
            Ok(match store.get(v.as_tensor()) {
                Some(t) => t.flatten_all()?.to_vec1()?,
                None => vec![0f32; p.rows() * h],
            })
        };
        let mut dlast = grad_of(&lv)?;
        let mut early_grads = Vec::new();
        let mut head_export = None;
        if let (Some(head), Some(hfwd), Some(hv)) = (&head, hfwd, &hv) {
            let mut hg = head.zero_grads()?;
            let mut dhin = head
                .backward(hfwd, grad_of(hv)?, Vec::new(), head_drop.as_ref(), &mut hg)?
                .expect("the head has no embeddings: its input's gradient comes back");
            for &off in p.offsets() {
                for j in 0..h {
                    dlast[off * h + j] += dhin[off * h + j];
                    dhin[off * h + j] = 0.0;
                }
            }
            early_grads.push((m.skip_from, dhin));
            head_export = Some(head.export(hg)?);
        }
        let mut bg = body.zero_grads()?;
        body.backward(fwd, dlast, early_grads, drop, &mut bg)?;
        let mut grads = ParamGrads::from_store(&params, store);
        grads.add_pairs(body.export(bg)?)?;
        if let Some(pairs) = head_export {
            grads.add_pairs(pairs)?;
        }
        g.grads = grads;
        Ok(g)
    }

    fn key(&self) -> super::TaskKey {
        let s = &self.spec;
        super::TaskKey {
            // the objective: the head's shape and the losses it trains
            loss: format!(
                "{} head_layers={} skip_from={} late_mlm={} cocondenser={:?}{}",
                if s.head_mlm { "condenser" } else { "plain mlm" },
                s.head_layers,
                s.skip_from,
                s.late_mlm,
                s.cocondenser,
                if s.freeze_backbone {
                    " backbone frozen"
                } else {
                    ""
                }
            ),
            data: self.blocks.key.clone(),
        }
    }

    fn dropout_rates(&self) -> DropoutRates {
        self.folder.config.dropout_rates()
    }

    /// The head's variables always; the backbone's unless it is frozen. (Its gradients are still
    /// computed: the head's backward runs through it; a frozen run costs what a full one does.)
    fn trains(&self, name: &str) -> bool {
        !self.spec.freeze_backbone || HEADS.iter().any(|h| name.starts_with(h))
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
