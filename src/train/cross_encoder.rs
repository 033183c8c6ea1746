//! Training a cross-encoder (sentence-transformers' CrossEncoder.fit): one label with BCE on
//! labels in [0, 1], or classes with cross-entropy; dev evaluation by an evaluator (STS
//! correlation for one label, accuracy for classes).
use super::backbone::Backbone;
use super::grads::ParamGrads;
use super::losses::{bce_with_logits, cross_entropy};
use super::params::{self, load_trainable};
use super::task::{dropout_key, Gradients, LossOutput, Score, TrainTask};
use crate::data::{PairColumns, Pairs};
use crate::error::{Error, Result};
use crate::eval::{Evaluator, Model};
use crate::model::engine::cpu::{self, Leaf};
use crate::model::engine::gpu::{Cuda, Training};
use crate::model::engine::Backend;
use crate::model::folders::save::save_cross_encoder;
use crate::model::kernels::dropout_hash::row_id;
use crate::model::CrossEncoderModel;
use crate::model::{CrossEncoder, Dropout, DropoutRates, ModelFolder, PairTokenizer};
use candle_core::backprop::GradStore;
use candle_core::{Device, Tensor};
use candle_nn::VarMap;
use indicatif::ProgressBar;
use std::path::{Path, PathBuf};

/// A cross-encoder's head: transformers' classifier, and the pooler a sentence-transformers
/// model may lack; only these may start fresh.
const HEADS: [&str; 2] = ["classifier.", "bert.pooler."];

pub struct CrossEncoderTask {
    pub model: CrossEncoder,
    pub tok: PairTokenizer,
    pub dev: Option<Box<dyn Evaluator>>,
    varmap: VarMap,
    folder: ModelFolder,
    fresh: Vec<String>,
    train: Vec<(Vec<u32>, Vec<u32>)>,
    labels: Vec<f32>,
    device: Device,
    /// What was changed of what was asked (a length cut to the model's positions).
    notes: Vec<String>,
    /// The GPU engine, made at the first step on a GPU and kept (cross_encoder_gpu.rs).
    gpu: std::sync::Mutex<Option<Training<Cuda>>>,
}

#[path = "cross_encoder_gpu.rs"]
mod gpu;

/// Check labels for the head: [0, 1] for one label, class ids below num_labels otherwise.
pub fn check_labels(path: &Path, column: &str, labels: &[f64], num_labels: usize) -> Result<()> {
    for (i, &l) in labels.iter().enumerate() {
        let ok = if num_labels == 1 {
            (0.0..=1.0).contains(&l)
        } else {
            l.fract() == 0.0 && l >= 0.0 && (l as usize) < num_labels
        };
        if !ok {
            let want = if num_labels == 1 {
                "a score in [0, 1] for one label".to_string()
            } else {
                format!("a class id in 0..{num_labels}")
            };
            return Err(Error::cell(
                path,
                i + 1,
                column,
                format!("label {l}: expected {want}"),
            ));
        }
    }
    Ok(())
}

/// The training pairs and how to read them.
pub struct CrossEncoderData<'a> {
    /// One file or several with the same columns, read in order as one training set (a
    /// cross-encoder trained on several collections' judgments, as GPL's teacher is).
    pub train: &'a [PathBuf],
    pub columns: &'a PairColumns,
    pub both_orders: bool,
}

impl CrossEncoderTask {
    pub fn new(
        model_dir: &Path,
        num_labels: usize,
        max_seq_length: usize,
        data: CrossEncoderData,
        seed: u64,
        device: &Device,
    ) -> Result<Self> {
        if num_labels == 0 {
            return Err(Error::msg("--num-labels must be at least 1"));
        }
        let folder = ModelFolder::open(model_dir)?;
        let (max_seq_length, note) = folder.config.fit_length(max_seq_length);
        let tok = PairTokenizer::new(folder.tokenizer()?, max_seq_length)?;
        let t = load_trainable(&folder.weights, &[], &HEADS, seed, device, |vb| {
            CrossEncoder::load(vb, &folder.config, num_labels)
        })?;
        if data.train.is_empty() {
            return Err(Error::msg("--train: no training file"));
        }
        let (mut train, mut labels) = (Vec::new(), Vec::new());
        for path in data.train {
            let gold = Pairs::read(path, data.columns)?;
            check_labels(path, &gold.label_column, &gold.labels, num_labels)?;
            for i in 0..gold.len() {
                train.push(tok.encode(&gold.sentence1[i], &gold.sentence2[i])?);
                labels.push(gold.labels[i] as f32);
                if data.both_orders {
                    train.push(tok.encode(&gold.sentence2[i], &gold.sentence1[i])?);
                    labels.push(gold.labels[i] as f32);
                }
            }
        }
        Ok(CrossEncoderTask {
            model: t.model,
            tok,
            dev: None,
            varmap: t.varmap,
            folder,
            fresh: t.fresh,
            train,
            labels,
            device: device.clone(),
            notes: note.into_iter().collect(),
            gpu: Default::default(),
        })
    }
}

/// The dropout site of the classifier's input, beyond every layer's.
const CLASSIFIER_SITE: u64 = u64::MAX;

impl TrainTask for CrossEncoderTask {
    fn key(&self) -> super::TaskKey {
        let mut f = super::fingerprint::Fingerprint::default();
        for (a, b) in &self.train {
            f.tokens(a).tokens(b);
        }
        f.values(&self.labels);
        let loss = if self.model.num_labels == 1 {
            "bce".to_string()
        } else {
            format!("cross-entropy {} classes", self.model.num_labels)
        };
        super::TaskKey {
            loss,
            data: f.hex(),
        }
    }

    fn set_precision(&mut self, p: crate::model::kernels::precision::Precision) -> Result<()> {
        self.model.set_precision(p)?;
        if p != crate::model::kernels::precision::Precision::F32 && !self.device.is_cpu() {
            // the GPU engine trains BERT in p; candle's ops on a GPU (the pooler, the
            // classifier, dev evaluation) run f32
            self.notes.push(format!(
                "--precision {}: BERT's products on the GPU engine run in it; the pooler, the \
                 classifier and dev evaluation on the GPU run f32",
                p.name()
            ));
        }
        Ok(())
    }

    fn num_examples(&self) -> usize {
        self.train.len()
    }

    fn backend(&self) -> Backend {
        Backend::of_bert(&self.model.bert)
    }

    fn notes(&self) -> Vec<String> {
        self.notes.clone()
    }

    fn split_weight(&self, idx: &[usize], _seed: u64) -> Option<f64> {
        Some(idx.len() as f64)
    }

    fn loss(&self, idx: &[usize], _seed: u64, drop: Option<&Dropout>) -> Result<LossOutput> {
        let items: Vec<(Vec<u32>, Vec<u32>)> = idx.iter().map(|&i| self.train[i].clone()).collect();
        let logits = self
            .model
            .forward_t(&self.tok.batch(&items, &self.device)?, drop)?;
        Ok(LossOutput::single(self.loss_of(&logits, idx)?))
    }

    /// Through the engine where it applies (the CPU in f32/bf16/f16 with BLAS; a GPU where
    /// the GPU engine takes the model, cross_encoder_gpu.rs) by `step`; candle's graph whole
    /// elsewhere.
    fn gradients(
        &self,
        idx: &[usize],
        seed: u64,
        drop: Option<&Dropout>,
        weight: f64,
    ) -> Result<Gradients> {
        let backend = self.backend();
        if let Some(gpu) = backend.gpu() {
            return self.on_gpu(gpu, idx, drop, weight);
        }
        let Some(eng) = backend.cpu_engine(&self.model.bert) else {
            let params = params::var_list(&self.varmap);
            return super::task::backward(self.loss(idx, seed, drop)?, weight, &params);
        };
        let on_cpu = OnCpu {
            task: self,
            eng: &eng,
            drop,
        };
        self.step(&on_cpu, idx, drop, weight)
    }

    fn dropout_rates(&self) -> DropoutRates {
        self.folder.config.dropout_rates()
    }

    fn evaluate(&self) -> Result<Option<Score>> {
        let Some(dev) = &self.dev else {
            return Ok(None);
        };
        self.release_gpu();
        let frozen = CrossEncoderModel {
            model: CrossEncoder::load(
                params::frozen(&self.varmap, &self.device),
                &self.folder.config,
                self.model.num_labels,
            )?,
            tok: self.tok.clone(),
            device: self.device.clone(),
        };
        let e = dev.run(&Model::CrossEncoder(&frozen), 64, &ProgressBar::hidden())?;
        Ok(Some(e.score()))
    }

    fn varmap(&self) -> &VarMap {
        &self.varmap
    }

    fn fresh(&self) -> &[String] {
        &self.fresh
    }

    fn save(&self, dir: &Path) -> Result<()> {
        save_cross_encoder(
            &self.folder,
            &params::named(&self.varmap),
            self.model.num_labels,
            self.tok.max_seq_length,
            dir,
        )
    }
}

impl CrossEncoderTask {
    /// Rows `idx` as the engines take them: token ids, token types, and each row's dropout key.
    fn packed(&self, idx: &[usize]) -> (Vec<&[u32]>, Vec<&[u32]>, Vec<u64>) {
        let ids = idx.iter().map(|&i| self.train[i].0.as_slice()).collect();
        let types = idx.iter().map(|&i| self.train[i].1.as_slice()).collect();
        (ids, types, self.keys(idx))
    }

    /// Each row's dropout key: its example (the engines' masks and the classifier's).
    fn keys(&self, idx: &[usize]) -> Vec<u64> {
        idx.iter().map(|&i| dropout_key(i, 0)).collect()
    }

    /// The step on an engine: BERT's `[CLS]` states of rows `idx` as a leaf (`bb`), the head
    /// and loss in candle, the engine's backward from the leaf's gradient; the head's gradients
    /// from candle's store, BERT's from the engine.
    fn step<B: Backbone>(
        &self,
        bb: &B,
        idx: &[usize],
        drop: Option<&Dropout>,
        weight: f64,
    ) -> Result<Gradients> {
        let (cls, tape) = bb.embed(idx, None, true)?;
        let (mut out, store) = self.head_step(&cls[0], idx, &self.keys(idx), drop, weight)?;
        let mut g = bb.zero_grads()?;
        bb.backward(tape.expect("kept: asked for"), &store, &mut g)?;
        let mut grads = ParamGrads::from_store(&params::var_list(&self.varmap), store);
        grads.add(bb.export(g)?)?;
        out.grads = grads;
        Ok(out)
    }

    /// The head and loss over the rows' `[CLS]` states `cls` (b, h) in candle, weighted, and
    /// the backward's store (the leaf's gradient and the head's); the classifier's input
    /// dropout keyed by example, as the engines key their own.
    fn head_step(
        &self,
        cls: &Tensor,
        idx: &[usize],
        keys: &[u64],
        drop: Option<&Dropout>,
        weight: f64,
    ) -> Result<(Gradients, candle_core::backprop::GradStore)> {
        let mask = match cpu::Stack::mask(drop, CLASSIFIER_SITE, false) {
            Some(m) => {
                let rows: Vec<u64> = keys.iter().map(|&k| row_id(k, 0)).collect();
                let h = cls.dim(1)?;
                Some(Tensor::from_vec(
                    m.rows(&rows, h),
                    (rows.len(), h),
                    &self.device,
                )?)
            }
            None => None,
        };
        let logits = self.model.head_masked(cls, mask.as_ref())?;
        let out = LossOutput::single(self.loss_of(&logits, idx)?);
        super::task::backward_store(out, weight)
    }

    /// BCE on one label's logits, or cross-entropy over classes.
    fn loss_of(&self, logits: &Tensor, idx: &[usize]) -> Result<Tensor> {
        let y: Vec<f32> = idx.iter().map(|&i| self.labels[i]).collect();
        let loss = if self.model.num_labels == 1 {
            bce_with_logits(
                &logits.squeeze(1)?,
                &Tensor::from_vec(y, idx.len(), &self.device)?,
            )?
        } else {
            let classes: Vec<u32> = y.iter().map(|v| *v as u32).collect();
            cross_entropy(logits, &Tensor::from_vec(classes, idx.len(), &self.device)?)?
        };
        Ok(loss)
    }
}

/// The CPU engine as a cross-encoder's backbone: the pairs packed with their token types, each
/// keyed by example, their `[CLS]` states narrowed from the leaf.
struct OnCpu<'a> {
    task: &'a CrossEncoderTask,
    eng: &'a cpu::Stack<'a>,
    drop: Option<&'a Dropout>,
}

impl Backbone for OnCpu<'_> {
    type Tape = Leaf;
    type Grads = cpu::Grads;

    /// The trainer splits a cross-encoder's batch (its loss is a mean over pairs).
    fn embed(
        &self,
        rows: &[usize],
        _: Option<usize>,
        tape: bool,
    ) -> Result<(Vec<Tensor>, Option<Leaf>)> {
        let (ids, types, keys) = self.task.packed(rows);
        let leaf = Leaf::forward(self.eng, &ids, Some(&types), &keys, self.drop)?;
        let cls = leaf.states.as_tensor().narrow(1, 0, 1)?.squeeze(1)?;
        Ok((vec![cls], tape.then_some(leaf)))
    }

    fn zero_grads(&self) -> Result<cpu::Grads> {
        Ok(self.eng.zero_grads()?)
    }

    fn backward(&self, leaf: Leaf, store: &GradStore, g: &mut cpu::Grads) -> Result<()> {
        Ok(leaf.backward(self.eng, store, self.drop, g)?)
    }

    fn export(&self, g: cpu::Grads) -> Result<ParamGrads> {
        Ok(ParamGrads::of_pairs(self.eng.export(g)?))
    }
}
