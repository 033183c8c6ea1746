//! Training a cross-encoder (sentence-transformers' CrossEncoder.fit): one label with BCE on
//! labels in [0, 1], or classes with cross-entropy; dev Spearman (one label) or accuracy.
use super::losses::{bce_with_logits, cross_entropy};
use super::params;
use super::trainer::TrainTask;
use crate::data::{PairColumns, Pairs};
use crate::error::{Error, Result};
use crate::eval::metrics::spearman;
use crate::model::cross_encoder::predict;
use crate::model::save::{config_json, copy_tokenizer_files, write_json};
use crate::model::{CrossEncoder, Dropout, ModelFolder, PairTokenizer};
use candle_core::{DType, Device, Tensor};
use candle_nn::{VarBuilder, VarMap};
use indicatif::ProgressBar;
use std::path::Path;

pub struct CrossEncoderTask {
    pub model: CrossEncoder,
    pub tok: PairTokenizer,
    varmap: VarMap,
    folder: ModelFolder,
    train: Vec<(Vec<u32>, Vec<u32>)>,
    labels: Vec<f32>,
    dev: Option<Pairs>,
    device: Device,
}

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

pub struct CrossEncoderData<'a> {
    pub train: &'a Path,
    pub dev: Option<&'a Path>,
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
        let device = device.clone();
        let folder = ModelFolder::open(model_dir)?;
        let tok = PairTokenizer::new(folder.tokenizer()?, max_seq_length)?;
        let varmap = VarMap::new();
        let vb = VarBuilder::from_varmap(&varmap, DType::F32, &device);
        let model = CrossEncoder::load(vb, &folder.config, num_labels)
            .map_err(|e| Error::file(&folder.weights, e))?;
        params::fill(&varmap, &folder.weights, seed)?;
        let gold = Pairs::read(data.train, data.columns)?;
        check_labels(data.train, &data.columns.label, &gold.labels, num_labels)?;
        let mut train = Vec::with_capacity(gold.len() * 2);
        let mut labels = Vec::with_capacity(gold.len() * 2);
        for i in 0..gold.len() {
            train.push(tok.encode(&gold.sentence1[i], &gold.sentence2[i])?);
            labels.push(gold.labels[i] as f32);
            if data.both_orders {
                train.push(tok.encode(&gold.sentence2[i], &gold.sentence1[i])?);
                labels.push(gold.labels[i] as f32);
            }
        }
        let dev = match data.dev {
            Some(p) => {
                let d = Pairs::read(p, data.columns)?;
                check_labels(p, &data.columns.label, &d.labels, num_labels)?;
                Some(d)
            }
            None => None,
        };
        Ok(CrossEncoderTask {
            model,
            tok,
            varmap,
            folder,
            train,
            labels,
            dev,
            device,
        })
    }
}

impl TrainTask for CrossEncoderTask {
    fn num_examples(&self) -> usize {
        self.train.len()
    }

    fn per_example_mean(&self) -> bool {
        true
    }

    fn loss(&self, idx: &[usize], drop: Option<&Dropout>) -> candle_core::Result<Tensor> {
        let items: Vec<(Vec<u32>, Vec<u32>)> = idx.iter().map(|&i| self.train[i].clone()).collect();
        let logits = self
            .model
            .forward_t(&self.tok.batch(&items, &self.device)?, drop)?;
        let y: Vec<f32> = idx.iter().map(|&i| self.labels[i]).collect();
        if self.model.num_labels == 1 {
            bce_with_logits(
                &logits.squeeze(1)?,
                &Tensor::from_vec(y, idx.len(), &self.device)?,
            )
        } else {
            let classes: Vec<u32> = y.iter().map(|v| *v as u32).collect();
            cross_entropy(
                &logits,
                &Tensor::from_vec(classes, idx.len(), &self.device)?,
            )
        }
    }

    fn evaluate(&self) -> Result<Option<(String, f64)>> {
        let Some(dev) = &self.dev else {
            return Ok(None);
        };
        let pairs: Vec<(&str, &str)> = dev
            .sentence1
            .iter()
            .zip(&dev.sentence2)
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        let model = CrossEncoder::load(
            params::frozen(&self.varmap, &self.device),
            &self.folder.config,
            self.model.num_labels,
        )
        ?;
        let scores = predict(
            &model,
            &self.tok,
            &pairs,
            64,
            &self.device,
            &ProgressBar::hidden(),
        )?;
        Ok(Some(if self.model.num_labels == 1 {
            let s: Vec<f64> = scores.iter().map(|v| v[0] as f64).collect();
            ("spearman".to_string(), spearman(&s, &dev.labels))
        } else {
            let hits = scores
                .iter()
                .zip(&dev.labels)
                .filter(|(s, l)| {
                    s.iter()
                        .enumerate()
                        .max_by(|a, b| a.1.total_cmp(b.1))
                        .map(|(i, _)| i as f64)
                        == Some(**l)
                })
                .count();
            (
                "accuracy".to_string(),
                hits as f64 / dev.labels.len() as f64,
            )
        }))
    }

    fn varmap(&self) -> &VarMap {
        &self.varmap
    }

    fn save(&self, dir: &Path) -> Result<()> {
        save_cross_encoder(
            &self.folder,
            &self.varmap,
            self.model.num_labels,
            self.tok.max_seq_length,
            dir,
        )
    }
}

/// An HF BertForSequenceClassification folder: config.json with the label count, weights, and the
/// source folder's tokenizer files.
pub fn save_cross_encoder(
    src: &ModelFolder,
    varmap: &VarMap,
    num_labels: usize,
    max_len: usize,
    dir: &Path,
) -> Result<()> {
    let mut cfg = config_json(src, "BertForSequenceClassification")?;
    let labels: serde_json::Map<String, serde_json::Value> = (0..num_labels)
        .map(|i| (i.to_string(), format!("LABEL_{i}").into()))
        .collect();
    let ids: serde_json::Map<String, serde_json::Value> = (0..num_labels)
        .map(|i| (format!("LABEL_{i}"), i.into()))
        .collect();
    cfg["id2label"] = labels.into();
    cfg["label2id"] = ids.into();
    cfg["max_length"] = max_len.into();
    write_json(&dir.join("config.json"), &cfg)?;
    params::save_vars(varmap, &dir.join("model.safetensors"))?;
    copy_tokenizer_files(src, dir)?;
    Ok(())
}
