//! The bi-encoder's training step as the trainer drives it: the batch order, the gradients (the
//! batch whole or by GradCache, over a backbone: candle's graph, the CPU engine, the GPU engine),
//! dev evaluation and the saved folder.
use super::backbone::{CpuEngine, Graph};
use super::task::{BiEncoderTask, HEAD_PREFIX};
use super::{gradcache, no_duplicates, plain};
use crate::error::{Error, Result};
use crate::eval::Model;
use crate::model::engine::Backend;
use crate::model::folders::save::{save_sentence_encoder, EncoderLayout};
use crate::model::kernels::precision::Precision;
use crate::model::{Dropout, DropoutRates};
use crate::train::backbone::Backbone;
use crate::train::params;
use crate::train::task::{Gradients, LossOutput, Score, TrainTask};
use crate::train::{fingerprint, task, TaskKey};
use candle_core::DType;
use candle_nn::VarMap;
use indicatif::ProgressBar;
use std::path::Path;

impl BiEncoderTask {
    /// A step over `bb`: the whole batch at once, or GradCache's two passes for a cached loss.
    fn step<B: Backbone>(&self, bb: &B, idx: &[usize], weight: f64) -> Result<Gradients> {
        match self.mini_batch {
            Some(m) => gradcache::gradients(self, bb, idx, weight, m),
            None => plain::gradients(self, bb, idx, weight),
        }
    }
}

impl TrainTask for BiEncoderTask {
    fn set_precision(&mut self, p: crate::model::kernels::precision::Precision) -> Result<()> {
        self.enc.bert.set_precision(p)?;
        let on_cpu = self.enc.bert.embeddings.word.embeddings().device().is_cpu();
        if p != Precision::F32 && !on_cpu {
            // the GPU engine trains in p and encodes the dev set in p too (encoder/on_gpu.rs);
            // where it declines the pooling (max), candle encodes, in f32
            let dev = if self.enc.backend().is_gpu() {
                "so do dev evaluation's, on the engine too"
            } else {
                "dev evaluation runs f32 on candle's graph (the engine does not pool max)"
            };
            self.notes.push(format!(
                "--precision {}: training's products on the GPU engine run in it; {dev}",
                p.name()
            ));
        }
        Ok(())
    }

    fn set_threads(&mut self, n: usize) -> Option<usize> {
        self.threads = n.max(1);
        (!self.spec.per_example && self.backend().is_cpu()).then_some(self.threads)
    }

    fn backend(&self) -> Backend {
        Backend::of_bert(&self.enc.bert)
    }

    fn notes(&self) -> Vec<String> {
        self.notes.clone()
    }

    fn num_examples(&self) -> usize {
        self.data.len()
    }

    fn key(&self) -> TaskKey {
        let mut f = fingerprint::Fingerprint::default();
        for column in &self.data.texts {
            for ids in column {
                f.tokens(ids);
            }
        }
        f.values(&self.data.target);
        TaskKey {
            loss: self.spec.name.to_string(),
            data: f.hex(),
        }
    }

    /// Losses with in-batch negatives get batches without repeated texts (NO_DUPLICATES).
    fn epoch_order(&self, seed: u64, epoch: usize, batch: usize) -> Vec<usize> {
        let order = task::epoch_order(self.num_examples(), seed, epoch);
        if self.spec.per_example {
            return order;
        }
        no_duplicates::arrange(order, &self.data.texts, batch)
    }

    fn split_weight(&self, idx: &[usize], _seed: u64) -> Option<f64> {
        self.spec.per_example.then_some(idx.len() as f64)
    }

    fn loss(&self, idx: &[usize], _seed: u64, drop: Option<&Dropout>) -> Result<LossOutput> {
        let emb = self.embed_columns(idx, drop)?;
        let target = self.target(idx)?;
        Ok(LossOutput::single(
            self.loss.forward(&emb, target.as_ref())?,
        ))
    }

    fn gradients(
        &self,
        idx: &[usize],
        _seed: u64,
        drop: Option<&Dropout>,
        weight: f64,
    ) -> Result<Gradients> {
        let backend = self.backend();
        if let Some(gpu) = backend.gpu() {
            return super::gpu_step::on_gpu(self, gpu, idx, drop, weight);
        }
        match backend.cpu_engine(&self.enc.bert) {
            Some(eng) => self.step(
                &CpuEngine {
                    task: self,
                    eng: &eng,
                    drop,
                },
                idx,
                weight,
            ),
            None => self.step(&Graph { task: self, drop }, idx, weight),
        }
    }

    fn dropout_rates(&self) -> DropoutRates {
        self.folder.config.dropout_rates()
    }

    fn evaluate(&self) -> Result<Option<Score>> {
        let Some(dev) = &self.dev else {
            return Ok(None);
        };
        // the engine's workspace is not held through the evaluation's own (the cross-encoder's
        // release_gpu says why)
        if let Some(gpu) = self.gpu.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            gpu.stack.release();
        }
        let (enc, head) = self.frozen()?;
        let model = Model::Encoder {
            enc: &enc,
            head: head.as_ref(),
            folder: None,
        };
        Ok(Some(dev.run(&model, 64, &ProgressBar::hidden())?.score()))
    }

    fn varmap(&self) -> &VarMap {
        &self.varmap
    }

    fn fresh(&self) -> &[String] {
        &self.fresh
    }

    /// The sentence-transformers folder; a loss's head goes beside it as `<name>.safetensors`.
    fn save(&self, dir: &Path) -> Result<()> {
        let head_name = self.loss.head().map(|(n, _)| n);
        let (mut backbone, mut head) = (params::Weights::new(), params::Weights::new());
        for (name, var) in params::vars(&self.varmap) {
            let t = var.as_tensor().to_dtype(DType::F32)?;
            match name.strip_prefix(&format!("{HEAD_PREFIX}.")) {
                Some(h) => {
                    let key = head_name
                        .and_then(|n| h.strip_prefix(&format!("{n}.")))
                        .unwrap_or(h);
                    head.insert(key.to_string(), t)
                }
                None => backbone.insert(name, t),
            };
        }
        let layout = EncoderLayout {
            pooling: self.enc.pooling,
            normalize: self.enc.normalize,
            max_seq_length: self.saved_len,
        };
        let head = head_name.filter(|_| !head.is_empty()).map(|n| (n, head));
        save_sentence_encoder(&self.folder, backbone, &layout, head, dir)
            .map_err(|e| Error::context(format!("saving {}", dir.display()), e))
    }
}
