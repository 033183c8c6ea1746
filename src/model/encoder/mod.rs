//! Sentence embeddings as sentence-transformers computes them: tokens with `[CLS]`/`[SEP]`, truncated
//! to max_seq_length, BERT, pooling, optional L2 normalisation. Texts are sorted by length so that
//! batches carry little padding; results come back in input order. On the CPU the engine runs
//! it (packed batches to a token budget, on every thread: `engine::batches`); on a GPU the GPU
//! engine where it takes the model (on_gpu.rs); elsewhere candle.
mod cross;
mod on_gpu;
mod prompts;

pub use cross::CrossEncoderModel;
pub use prompts::Prompts;

use super::engine::cpu::{self, pad};
use super::engine::gpu::DevicePooling;
use super::engine::{run_batches, Backend};
use super::kernels::dropout::Dropout;
use super::layers::batch::{by_length, TokenBatch};
use super::layers::bert::Bert;
use super::layers::pooling::{l2_normalize, l2_normalize_row, Pooling};
use super::layers::specials::Specials;
use super::layers::vectors::Embeddings;
use crate::error::{Context, Result};
use crate::tokenize::Tokenizer;
use candle_core::{DType, Device, Tensor};
use indicatif::ProgressBar;
use rayon::prelude::*;

pub struct SentenceEncoder {
    pub bert: Bert,
    pub tokenizer: Tokenizer,
    pub pooling: Pooling,
    pub normalize: bool,
    pub max_seq_length: usize,
    pub device: Device,
    pub special: Specials,
    /// The folder's prompts (none for a model made in training): `encode` prepends the default,
    /// `encode_query` and `encode_document` theirs.
    pub prompts: Prompts,
}

impl SentenceEncoder {
    /// The same encoder around other BERT weights (e.g. untracked copies for evaluation).
    pub fn with_bert(&self, bert: Bert) -> SentenceEncoder {
        SentenceEncoder {
            bert,
            tokenizer: self.tokenizer.clone(),
            device: self.device.clone(),
            prompts: self.prompts.clone(),
            ..*self
        }
    }

    pub fn new(
        bert: Bert,
        tokenizer: Tokenizer,
        pooling: Pooling,
        normalize: bool,
        max_seq_length: usize,
        device: &Device,
    ) -> Result<Self> {
        let special = Specials::of(&tokenizer)?;
        Ok(SentenceEncoder {
            bert,
            tokenizer,
            pooling,
            normalize,
            max_seq_length: max_seq_length.max(2),
            device: device.clone(),
            special,
            prompts: Prompts::default(),
        })
    }

    pub fn dim(&self) -> usize {
        self.bert.config.hidden_size * self.pooling.modes()
    }

    /// `[CLS]` text `[SEP]`, truncated to max_seq_length.
    pub fn token_ids(&self, text: &str) -> Result<Vec<u32>> {
        let mut ids = Vec::with_capacity(32);
        ids.push(self.special.cls);
        self.tokenizer.ids_into(text, &mut ids)?;
        ids.truncate(self.max_seq_length - 1);
        ids.push(self.special.sep);
        Ok(ids)
    }

    /// The engine this encoder encodes on (model/engine/backend.rs): the GPU engine where it
    /// takes the model and the device runs the pooling (not max), the CPU engine, or candle's
    /// graph.
    pub fn backend(&self) -> Backend {
        let b = Backend::of_bert(&self.bert);
        if b.is_gpu() && DevicePooling::of(self.pooling).is_none() {
            return Backend::Graph("the GPU engine does not pool max".into());
        }
        b
    }

    /// The CPU engine where the backend is it.
    fn cpu_engine(&self) -> Option<cpu::Stack<'_>> {
        self.backend().cpu_engine(&self.bert)
    }

    /// Embeddings (b, dim) of already tokenized sequences, as a tensor (inference: no gradient).
    /// On the CPU in f32 the engine runs the forward (packed, no padding, no tape: 2-3x candle's
    /// graph for length-sorted batches); its states equal candle's (tests/engine.rs).
    pub fn embed(&self, seqs: &[&[u32]]) -> candle_core::Result<Tensor> {
        match self.cpu_engine() {
            Some(engine) => {
                let fwd = engine.forward(seqs, None, None, None, false)?;
                let (states, mask, _) = pad(&fwd)?;
                self.pool(&states, &mask)
            }
            None => self.embed_t(seqs, None),
        }
    }

    /// Pool token states (b, len, h) under their (b, len) mask, normalised where the model is.
    pub fn pool(&self, states: &Tensor, mask: &Tensor) -> candle_core::Result<Tensor> {
        let pooled = self.pooling.forward(states, mask)?;
        if self.normalize {
            l2_normalize(&pooled)
        } else {
            Ok(pooled)
        }
    }

    /// As `embed`, with dropout when training.
    pub fn embed_t(&self, seqs: &[&[u32]], drop: Option<&Dropout>) -> candle_core::Result<Tensor> {
        let b = TokenBatch::new(seqs, None, self.special.pad, &self.device)?;
        let states = self.bert.forward_t(&b.ids, &b.type_ids, &b.mask, drop)?;
        let pooled = self.pooling.forward(&states, &b.mask)?;
        if self.normalize {
            l2_normalize(&pooled)
        } else {
            Ok(pooled)
        }
    }

    /// Encode texts with the folder's default prompt before each (none without one), as
    /// sentence-transformers' `encode` does.
    pub fn encode(
        &self,
        texts: &[&str],
        batch_size: usize,
        progress: &ProgressBar,
    ) -> Result<Embeddings> {
        let prompt = self.prompts.default_prompt().map(|p| p.1.to_string());
        self.encode_prompted(texts, prompt.as_deref(), batch_size, progress)
    }

    /// Encode queries: the folder's "query" prompt, else its default (`encode_query`).
    pub fn encode_query(
        &self,
        texts: &[&str],
        batch_size: usize,
        progress: &ProgressBar,
    ) -> Result<Embeddings> {
        let prompt = self.prompts.query();
        self.encode_prompted(texts, prompt.as_deref(), batch_size, progress)
    }

    /// Encode documents: the folder's "document" (or "passage", "corpus") prompt, else its
    /// default (`encode_document`).
    pub fn encode_document(
        &self,
        texts: &[&str],
        batch_size: usize,
        progress: &ProgressBar,
    ) -> Result<Embeddings> {
        let prompt = self.prompts.document();
        self.encode_prompted(texts, prompt.as_deref(), batch_size, progress)
    }

    /// The tokens a prompt's text puts before a text, `[CLS]` included: what the pooling leaves
    /// out where the folder's include_prompt is false (sentence-transformers' prompt_length).
    pub fn prompt_length(&self, prompt: &str) -> Result<usize> {
        let mut ids = Vec::new();
        self.tokenizer.ids_into(prompt, &mut ids)?;
        Ok(1 + ids.len())
    }

    /// Encode texts with `prompt` before each (None or "": as given), in length-sorted batches;
    /// rows come back in input order. On the engine a batch holds up to `batch_size` sequences'
    /// worth of tokens at max_seq_length, at most `MAX_BATCH_TOKENS`, filled with as many texts
    /// as fit.
    pub fn encode_prompted(
        &self,
        texts: &[&str],
        prompt: Option<&str>,
        batch_size: usize,
        progress: &ProgressBar,
    ) -> Result<Embeddings> {
        let prompt = prompt.filter(|p| !p.is_empty());
        // the leading rows the pooling leaves out (include_prompt false)
        let skip = match (prompt, self.prompts.include_prompt) {
            (Some(p), false) => self.prompt_length(p)?,
            _ => 0,
        };
        let seqs: Vec<Vec<u32>> = texts
            .par_iter()
            .map(|t| match prompt {
                Some(p) => self.token_ids(&format!("{p}{t}")),
                None => self.token_ids(t),
            })
            .collect::<Result<_>>()?;
        let dim = self.dim();
        let lens: Vec<usize> = seqs.iter().map(Vec::len).collect();
        let engine = self.cpu_engine();
        if skip > 0 && engine.is_none() {
            return Err(crate::error::Error::msg(
                "a prompt left out of the pooling (the folder's include_prompt false) is applied \
                 on the CPU engine only; encode on the CPU",
            ));
        }
        let rows = match engine {
            Some(engine) => {
                let budget = token_budget(batch_size, self.max_seq_length);
                let threads = rayon::current_num_threads();
                engine
                    .infer(|run| {
                        Ok(run_batches(&lens, budget, threads, progress, |batch| {
                            let b: Vec<&[u32]> =
                                batch.iter().map(|&i| seqs[i].as_slice()).collect();
                            if self.pooling.first_token_only() && skip == 0 {
                                // the last layer at the [CLS] rows only (engine/cpu/first_token.rs)
                                let cls = run.forward_first(&b, None).doing("model forward")?;
                                return Ok(self.cls_rows(cls, b.len()));
                            }
                            let fwd = run.forward(&b, None).doing("model forward")?;
                            Ok(self.pool_packed(&fwd, skip))
                        }))
                    })
                    .doing("model forward")??
            }
            // on a GPU, the GPU engine where it takes the model (on_gpu.rs), else candle
            None => match self.on_gpu(&seqs, batch_size, progress) {
                Some(rows) => rows?,
                None => by_length(&lens, batch_size, progress, |chunk| {
                    let batch: Vec<&[u32]> = chunk.iter().map(|&i| seqs[i].as_slice()).collect();
                    let rows: Vec<Vec<f32>> = self
                        .embed(&batch)
                        .and_then(|t| t.to_dtype(DType::F32)?.to_vec2())
                        .doing("model forward")?;
                    Ok(rows)
                })?,
            },
        };
        let data = rows.concat();
        Ok(Embeddings { dim, data })
    }

    /// Each item's embedding from its `[CLS]` row (items rows of cls).
    fn cls_rows(&self, cls: Vec<f32>, items: usize) -> Vec<Vec<f32>> {
        let h = cls.len() / items.max(1);
        cls.chunks_exact(h.max(1))
            .map(|r| {
                let mut e = r.to_vec();
                if self.normalize {
                    l2_normalize_row(&mut e);
                }
                e
            })
            .collect()
    }

    /// Each item's embedding from the engine's packed last-layer rows, its first `skip` rows
    /// left out (a prompt the pooling excludes; sentence-transformers zeroes their mask, so a
    /// text of the prompt alone pools nothing).
    fn pool_packed(&self, fwd: &cpu::Forward, skip: usize) -> Vec<Vec<f32>> {
        let h = self.bert.config.hidden_size;
        let p = &fwd.packed;
        p.offsets()
            .iter()
            .zip(p.lens())
            .map(|(&off, &n)| {
                let mut e = Vec::with_capacity(self.dim());
                let from = off + skip.min(n);
                self.pooling
                    .pool_rows(&fwd.hidden[from * h..(off + n) * h], h, &mut e);
                if self.normalize {
                    l2_normalize_row(&mut e);
                }
                e
            })
            .collect()
    }
}

/// The engine's token budget a batch: `batch_size` sequences at `max_len` tokens (the padded
/// batch a user of `--batch-size` asks for), packed with as many texts as fit, and at most
/// `MAX_BATCH_TOKENS` (or one text at `max_len`, where longer).
pub fn token_budget(batch_size: usize, max_len: usize) -> usize {
    (batch_size.max(1) * max_len.max(1)).min(MAX_BATCH_TOKENS.max(max_len))
}

/// Tokens an inference batch holds at most, whatever `--batch-size` asks. Larger batches bought
/// no speed, only memory (a batch's activations are ~2,700 floats a token for MiniLM, the FFN's
/// 1,536 the widest): on a 2-core Zen 3 (OpenBLAS, f32), 1,024 tokens against 32 x max length ran
/// STSb at 554-559 against 536-554 sentences/s (peak RSS 228-239 against 450 MB), Cranfield at 38.3
/// against 37.0 documents/s (203 against 559 MB) and cross-encoder pairs at 321 against 318-323
/// pairs/s (193 against 868 MB) (benches/README.md, issue 35).
pub const MAX_BATCH_TOKENS: usize = 1024;
