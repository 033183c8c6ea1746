//! A cross-encoder as transformers' BertForSequenceClassification: BERT, the pooler (dense + tanh
//! on `[CLS]`), dropout, and a linear classifier, on "`[CLS]` a `[SEP]` b `[SEP]`" with token types 0/1.
//! One label: a score through sigmoid; several: class probabilities through softmax.
use super::batch::TokenBatch;
use super::bert::Bert;
use super::config::BertConfig;
use super::linear::Linear;
use super::specials::Specials;
use crate::error::Result;
use crate::model::kernels::dropout::{maybe, Dropout};
use crate::tokenize::Tokenizer;
use candle_core::{Device, Module, Tensor, D};
use candle_nn::VarBuilder;

pub struct CrossEncoder {
    pub bert: Bert,
    pooler: Linear,
    classifier: Linear,
    pub num_labels: usize,
}

impl CrossEncoder {
    /// Weights by transformers' names: bert.*, bert.pooler.dense, classifier.
    pub fn load(
        vb: VarBuilder,
        c: &BertConfig,
        num_labels: usize,
    ) -> candle_core::Result<CrossEncoder> {
        let h = c.hidden_size;
        Ok(CrossEncoder {
            bert: Bert::load(vb.pp("bert"), c)?,
            pooler: Linear::load(vb.pp("bert.pooler.dense"), h, h)?,
            classifier: Linear::load(vb.pp("classifier"), h, num_labels)?,
            num_labels,
        })
    }

    /// The products' precision (model/kernels/precision.rs) of BERT, pooler and classifier.
    pub fn set_precision(
        &mut self,
        p: crate::model::kernels::precision::Precision,
    ) -> candle_core::Result<()> {
        self.bert.set_precision(p)?;
        self.pooler.set_precision(p)?;
        self.classifier.set_precision(p)
    }

    /// Logits (b, num_labels).
    pub fn forward_t(&self, b: &TokenBatch, drop: Option<&Dropout>) -> candle_core::Result<Tensor> {
        let states = self.bert.forward_t(&b.ids, &b.type_ids, &b.mask, drop)?;
        self.head(&states.narrow(1, 0, 1)?.squeeze(1)?, drop)
    }

    /// Logits from the `[CLS]` states (b, h): pooler, tanh, dropout, classifier.
    pub fn head(&self, cls: &Tensor, drop: Option<&Dropout>) -> candle_core::Result<Tensor> {
        let pooled = self.pooler.forward(cls)?.tanh()?;
        self.classifier.forward(&maybe(drop, pooled)?)
    }

    /// As `head`, the classifier's input dropout given as a (b, h) mask of 0 or 1 / keep (the
    /// engine's, keyed by example).
    pub fn head_masked(&self, cls: &Tensor, mask: Option<&Tensor>) -> candle_core::Result<Tensor> {
        let pooled = self.pooler.forward(cls)?.tanh()?;
        match mask {
            Some(m) => self.classifier.forward(&(pooled * m)?),
            None => self.classifier.forward(&pooled),
        }
    }
}

/// Tokenized sentence pairs for a cross-encoder.
#[derive(Clone)]
pub struct PairTokenizer {
    pub tokenizer: Tokenizer,
    pub special: Specials,
    pub max_seq_length: usize,
}

impl PairTokenizer {
    pub fn new(tokenizer: Tokenizer, max_seq_length: usize) -> Result<PairTokenizer> {
        let special = Specials::of(&tokenizer)?;
        Ok(PairTokenizer {
            tokenizer,
            special,
            max_seq_length: max_seq_length.max(4),
        })
    }

    /// "`[CLS]` a `[SEP]` b `[SEP]`" and token types, truncating the longer side first (longest_first).
    pub fn encode(&self, a: &str, b: &str) -> Result<(Vec<u32>, Vec<u32>)> {
        let (mut x, mut y) = (self.tokenizer.ids(a)?, self.tokenizer.ids(b)?);
        while x.len() + y.len() + 3 > self.max_seq_length {
            if x.len() > y.len() {
                x.pop();
            } else {
                y.pop();
            }
        }
        let mut ids = Vec::with_capacity(x.len() + y.len() + 3);
        ids.push(self.special.cls);
        ids.extend(&x);
        ids.push(self.special.sep);
        let first = ids.len();
        ids.extend(&y);
        ids.push(self.special.sep);
        let mut types = vec![0u32; first];
        types.resize(ids.len(), 1);
        Ok((ids, types))
    }

    pub fn batch(
        &self,
        pairs: &[(Vec<u32>, Vec<u32>)],
        device: &Device,
    ) -> candle_core::Result<TokenBatch> {
        let ids: Vec<&[u32]> = pairs.iter().map(|p| p.0.as_slice()).collect();
        let types: Vec<&[u32]> = pairs.iter().map(|p| p.1.as_slice()).collect();
        TokenBatch::new(&ids, Some(&types), self.special.pad, device)
    }
}

/// Scores from logits: sigmoid for one label, softmax over classes otherwise.
pub fn activate(logits: &Tensor) -> candle_core::Result<Tensor> {
    if logits.dim(D::Minus1)? == 1 {
        candle_nn::ops::sigmoid(logits)
    } else {
        crate::model::kernels::softmax::softmax_last_dim(logits)
    }
}
