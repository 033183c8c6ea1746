//! A trained cross-encoder ready to score pairs. On the CPU the engine runs BERT (packed batches
//! to a token budget, on every thread, as the sentence encoder does; its last layer at the
//! `[CLS]` rows only, all the head reads) and candle the small head (pooler, tanh, classifier)
//! on those rows; on a GPU the GPU engine where it takes the model (`[CLS]` pooled on the
//! device, on_gpu.rs), the head in candle there; elsewhere candle's padded graph runs it all.
use crate::error::{Context, Error, Result};
use crate::model::engine::gpu::DevicePooling;
use crate::model::engine::{run_batches, Backend};
use crate::model::layers::batch::by_length;
use crate::model::layers::cross_encoder::activate;
use crate::model::{CrossEncoder, PairTokenizer};
use candle_core::{Device, Tensor};

pub struct CrossEncoderModel {
    pub model: CrossEncoder,
    pub tok: PairTokenizer,
    pub device: Device,
}

impl CrossEncoderModel {
    /// Scores per pair (sigmoid for one label, class probabilities otherwise), in length-sorted
    /// batches (on the engine: up to `batch` pairs' worth of tokens at the model's max length, at
    /// most `super::MAX_BATCH_TOKENS`); rows in input order.
    pub fn predict(
        &self,
        pairs: &[(&str, &str)],
        batch: usize,
        progress: &indicatif::ProgressBar,
    ) -> Result<Vec<Vec<f32>>> {
        let enc: Vec<(Vec<u32>, Vec<u32>)> = pairs
            .iter()
            .map(|(a, b)| self.tok.encode(a, b))
            .collect::<Result<_>>()?;
        let lens: Vec<usize> = enc.iter().map(|e| e.0.len()).collect();
        if let Some(engine) = self.backend().cpu_engine(&self.model.bert) {
            let budget = super::token_budget(batch, self.tok.max_seq_length);
            let threads = rayon::current_num_threads();
            return engine
                .infer(|run| {
                    Ok(run_batches(&lens, budget, threads, progress, |chunk| {
                        let ids: Vec<&[u32]> = chunk.iter().map(|&i| enc[i].0.as_slice()).collect();
                        let types: Vec<&[u32]> =
                            chunk.iter().map(|&i| enc[i].1.as_slice()).collect();
                        let cls = run
                            .forward_first(&ids, Some(&types))
                            .doing("cross-encoder forward")?;
                        self.head_scores(cls, ids.len()).doing("cross-encoder head")
                    }))
                })
                .doing("cross-encoder forward")?;
        }
        // on a GPU, the GPU engine where it takes the model: [CLS] pooled on the device
        if let Some(scores) = self.on_gpu(&enc, batch, progress) {
            return scores;
        }
        by_length(&lens, batch, progress, |chunk| {
            let items: Vec<(Vec<u32>, Vec<u32>)> = chunk.iter().map(|&i| enc[i].clone()).collect();
            let scores: Vec<Vec<f32>> = self
                .tok
                .batch(&items, &self.device)
                .and_then(|b| activate(&self.model.forward_t(&b, None)?)?.to_vec2())
                .doing("cross-encoder forward")?;
            Ok(scores)
        })
    }

    /// Scores from the engine's `[CLS]` rows (items x hidden) through the head, on the model's
    /// device (the CPU's engine or a GPU's).
    fn head_scores(&self, cls: Vec<f32>, items: usize) -> candle_core::Result<Vec<Vec<f32>>> {
        let h = cls.len() / items.max(1);
        let cls = Tensor::from_vec(cls, (items, h), &self.device)?;
        activate(&self.model.head(&cls, None)?)?.to_vec2()
    }

    /// The engine this cross-encoder scores on (model/engine/backend.rs).
    pub fn backend(&self) -> Backend {
        Backend::of_bert(&self.model.bert)
    }

    /// On a GPU, the scores of the tokenized pairs `enc` from the GPU engine where it takes
    /// the model (`backend`); None: candle's padded graph scores them (a build without CUDA
    /// has no GPU).
    fn on_gpu(
        &self,
        enc: &[(Vec<u32>, Vec<u32>)],
        batch: usize,
        progress: &indicatif::ProgressBar,
    ) -> Option<Result<Vec<Vec<f32>>>> {
        let backend = self.backend();
        let gpu = backend.gpu()?;
        Some(
            crate::model::engine::gpu::Cuda::new(gpu)
                .doing("the GPU engine")
                .and_then(|dev| self.scores_on(dev, enc, batch, progress)),
        )
    }

    /// The scores of `enc` on `dev`'s GPU engine: `[CLS]` rows pooled on the device, the head
    /// (pooler, tanh, classifier) in candle on the model's device, a batch at a time.
    fn scores_on<D: crate::model::engine::gpu::Device>(
        &self,
        dev: D,
        enc: &[(Vec<u32>, Vec<u32>)],
        batch: usize,
        progress: &indicatif::ProgressBar,
    ) -> Result<Vec<Vec<f32>>> {
        let cls = DevicePooling::of(crate::model::Pooling::CLS).expect("the device pools [CLS]");
        let ids: Vec<&[u32]> = enc.iter().map(|e| e.0.as_slice()).collect();
        let types: Vec<&[u32]> = enc.iter().map(|e| e.1.as_slice()).collect();
        let bert = &self.model.bert;
        super::on_gpu::on_engine(
            bert,
            dev,
            (cls, false),
            (&ids, Some(&types)),
            (batch, progress),
            |rows, w| {
                let items = rows.len() / w.max(1);
                self.head_scores(rows, items).doing("cross-encoder head")
            },
        )
    }

    /// One score per pair: needs a one-label cross-encoder.
    pub fn scores(
        &self,
        pairs: &[(&str, &str)],
        batch: usize,
        progress: &indicatif::ProgressBar,
    ) -> Result<Vec<f64>> {
        if self.model.num_labels != 1 {
            return Err(Error::msg(format!(
                "this cross-encoder predicts {} classes; a score per pair needs a one-label model",
                self.model.num_labels
            )));
        }
        Ok(self
            .predict(pairs, batch, progress)?
            .into_iter()
            .map(|s| s[0] as f64)
            .collect())
    }
}

#[cfg(test)]
#[path = "cross_test.rs"]
mod tests;
