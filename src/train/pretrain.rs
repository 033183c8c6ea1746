//! Condenser pre-training as a TrainTask: whole-word-masked blocks through the backbone and the
//! head; loss = MLM through the head + MLM on the late layer (unless turned off), + coCondenser's
//! span contrast when asked. The output is
//! the backbone as a plain HF BERT folder plus condenser_head.safetensors (head layers and MLM head)
//! that --continue-from reads back.
use super::corpus::Blocks;
use super::losses::{cross_entropy, span_contrastive};
use super::masking::Masker;
use super::params;
use super::spans::two_spans;
use super::trainer::TrainTask;
use crate::error::{Error, Result};
use crate::hash::mix64;
use crate::model::condenser::Condenser;
use crate::model::save::{config_json, copy_tokenizer_files, write_json};
use crate::model::{Dropout, ModelFolder, TokenBatch};
use candle_core::{DType, Device, Tensor};
use candle_nn::{VarBuilder, VarMap};
use rand::SeedableRng;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;

pub const HEAD_FILE: &str = "condenser_head.safetensors";

pub struct PretrainTask {
    pub model: Condenser,
    pub masker: Masker,
    pub blocks: Blocks,
    pub spec: PretrainSpec,
    pad: u32,
    device: Device,
    varmap: VarMap,
    folder: ModelFolder,
    /// The last micro-batch's loss parts (head MLM, late MLM) for the training log.
    parts: Mutex<Vec<(&'static str, f64)>>,
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

impl PretrainTask {
    /// The backbone from `init`; the head and MLM head from `init/condenser_head.safetensors`
    /// when present (--continue-from), else fresh (BERT init; decoder tied to the word embeddings).
    pub fn new(
        init: &Path,
        blocks: Blocks,
        spec: &PretrainSpec,
        device: &Device,
    ) -> Result<PretrainTask> {
        let device = device.clone();
        let folder = ModelFolder::open(init)?;
        let tok = folder.tokenizer()?;
        let varmap = VarMap::new();
        let vb = VarBuilder::from_varmap(&varmap, DType::F32, &device);
        let model = Condenser::load(vb, &folder.config, spec.head_layers, spec.skip_from)
            .map_err(|e| Error::file(&folder.weights, e))?;
        params::fill(&varmap, &folder.weights, spec.seed)?;
        let head = folder.transformer_dir.join(HEAD_FILE);
        if head.is_file() {
            params::fill_present(&varmap, &head)?;
        }
        let pad = crate::model::Specials::of(&tok)?.pad;
        Ok(PretrainTask {
            model,
            masker: Masker::new(&tok)?,
            blocks,
            spec: spec.clone(),
            pad,
            device,
            varmap,
            folder,
            parts: Mutex::new(Vec::new()),
        })
    }
}

impl TrainTask for PretrainTask {
    fn num_examples(&self) -> usize {
        self.blocks.len
    }

    fn loss(&self, idx: &[usize], drop: Option<&Dropout>) -> candle_core::Result<Tensor> {
        // masks drawn from (seed, the batch's blocks): a resumed run masks exactly as before
        let key = idx.iter().fold(self.spec.seed, |h, &i| mix64(h ^ i as u64));
        let mut rng = rand::rngs::StdRng::seed_from_u64(key);
        let mut inputs = Vec::with_capacity(idx.len());
        let mut targets = Vec::new();
        let mut positions = Vec::new();
        let mut seqs: Vec<Vec<u32>> = idx
            .iter()
            .map(|&i| self.blocks.get(i).map_err(candle_core::Error::wrap))
            .collect::<candle_core::Result<_>>()?;
        if let Some(span) = self.spec.cocondenser {
            // rows [a1, b1, a2, b2, ...]: the layout span_contrastive expects
            seqs = seqs
                .iter()
                .flat_map(|d| two_spans(d, span, &self.masker, &mut rng))
                .collect();
        }
        let width = seqs.iter().map(|s| s.len()).max().unwrap_or(1);
        for (r, s) in seqs.iter().enumerate() {
            let m = self.masker.mask(s, &mut rng);
            positions.extend(m.positions.iter().map(|&p| (r * width + p) as u32));
            targets.extend(m.targets);
            inputs.push(m.input);
        }
        let dev = &self.device;
        let refs: Vec<&[u32]> = inputs.iter().map(|v| v.as_slice()).collect();
        let batch = TokenBatch::new(&refs, None, self.pad, dev)?;
        let n = positions.len();
        let pos = Tensor::from_vec(positions, n, dev)?;
        let tgt = Tensor::from_vec(targets, n, dev)?;
        let out = self
            .model
            .forward_t(&batch, &pos, self.spec.late_mlm, drop)?;
        let head = cross_entropy(&out.head_logits, &tgt)?;
        let mut total = head.clone();
        let mut parts = vec![("head_mlm", head.to_scalar::<f32>()? as f64)];
        if let Some(l) = &out.late_logits {
            let late = cross_entropy(l, &tgt)?;
            parts.push(("late_mlm", late.to_scalar::<f32>()? as f64));
            total = (total + late)?;
        }
        if self.spec.cocondenser.is_some() {
            let co = span_contrastive(&out.cls)?;
            parts.push(("contrastive", co.to_scalar::<f32>()? as f64));
            total = (total + co)?;
        }
        *self.parts.lock().unwrap() = parts;
        Ok(total)
    }

    fn evaluate(&self) -> Result<Option<(String, f64)>> {
        Ok(None)
    }

    fn loss_parts(&self) -> Vec<(&'static str, f64)> {
        self.parts.lock().unwrap().clone()
    }

    fn varmap(&self) -> &VarMap {
        &self.varmap
    }

    fn save(&self, dir: &Path) -> Result<()> {
        let (mut backbone, mut head) = (HashMap::new(), HashMap::new());
        for (name, var) in params::vars(&self.varmap) {
            match name.strip_prefix("bert.") {
                Some(b) => backbone.insert(b.to_string(), var.as_tensor().clone()),
                None => head.insert(name, var.as_tensor().clone()),
            };
        }
        std::fs::create_dir_all(dir).map_err(|e| Error::file(dir, e))?;
        write_json(
            &dir.join("config.json"),
            &config_json(&self.folder, "BertModel")?,
        )?;
        params::save_tensors(&backbone, &dir.join("model.safetensors"))?;
        params::save_tensors(&head, &dir.join(HEAD_FILE))?;
        copy_tokenizer_files(&self.folder, dir)
    }
}
