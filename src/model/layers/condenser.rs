//! Condenser (Gao & Callan 2021): a BERT backbone plus a short head that reads the LAST layer's
//! `[CLS]` and the token states of an EARLY layer (`skip_from`), so that masked-token prediction
//! through the head must route sentence information through `[CLS]`. One MLM head (transform +
//! decoder tied to the word embeddings + bias) serves both the head's loss and the backbone's
//! late-layer loss.
use super::batch::TokenBatch;
use super::bert::{attention_bias, Bert, BertLayer};
use super::config::{Activation, BertConfig};
use super::linear::Linear;
use super::norm::LayerNorm;
use crate::model::kernels::dropout::Dropout;
use crate::model::kernels::precision::Precision;
use candle_core::{Module, Result, Tensor};
use candle_nn::VarBuilder;

/// BERT's MLM prediction head (`cls.predictions`): dense + activation + LayerNorm, then the
/// word-embedding matrix as decoder, plus a bias.
pub struct MlmHead {
    dense: Linear,
    norm: LayerNorm,
    bias: Tensor,
    act: Activation,
    precision: Precision,
}

impl MlmHead {
    pub fn load(vb: VarBuilder, c: &BertConfig) -> Result<MlmHead> {
        let h = c.hidden_size;
        Ok(MlmHead {
            dense: Linear::load(vb.pp("transform.dense"), h, h)?,
            norm: LayerNorm::load(vb.pp("transform.LayerNorm"), h, c.layer_norm_eps)?,
            bias: vb.get_with_hints(c.vocab_size, "bias", candle_nn::Init::Const(0.0))?,
            act: c.hidden_act,
            precision: Precision::F32,
        })
    }

    /// Vocabulary logits (n, V) of states (n, h), the decoder tied to `word_embeddings` (V, h).
    pub fn forward(&self, x: &Tensor, word_embeddings: &Tensor) -> Result<Tensor> {
        let t = &self
            .norm
            .forward(&self.act.forward(&self.dense.forward(x)?)?)?;
        // the tied decoder is a Linear whose weight is the word embeddings: the fused op adds the
        // bias inside the GEMM, and its backward sums the bias gradient with one sgemm (a
        // broadcast add's backward is a strided column sum over (positions, vocabulary))
        Linear::new(word_embeddings.clone(), Some(self.bias.clone()))
            .with_precision(self.precision)?
            .forward(t)
    }

    pub fn set_precision(&mut self, p: Precision) -> Result<()> {
        self.precision = p;
        self.dense.set_precision(p)
    }
}

pub struct Condenser {
    pub bert: Bert,
    pub head: Vec<BertLayer>,
    pub mlm: MlmHead,
    /// Layer whose token states feed the head (k = output of the k-th encoder layer).
    pub skip_from: usize,
    /// Whether the head's MLM loss is trained: false for plain MLM (the last layer's loss
    /// alone, no head layers), the control that shows what more pre-training alone does.
    pub head_mlm: bool,
}

/// Logits at the masked positions: from the head (unless plain MLM), and from the backbone's
/// last layer.
pub struct CondenserOutput {
    pub head_logits: Option<Tensor>,
    pub late_logits: Option<Tensor>,
    /// The last layer's `[CLS]` vectors (b, h), for coCondenser's span contrast.
    pub cls: Tensor,
}

impl Condenser {
    /// Backbone, head layers and MLM head in precision `p` (model/kernels/precision.rs).
    pub fn set_precision(&mut self, p: Precision) -> Result<()> {
        self.bert.set_precision(p)?;
        self.head.iter_mut().try_for_each(|l| l.set_precision(p))?;
        self.mlm.set_precision(p)
    }

    /// Backbone under `bert.`, head layers under `c_head.{i}.`, MLM head under `cls.predictions.`
    /// (the names of the reference implementation and of BertForMaskedLM).
    pub fn load(
        vb: VarBuilder,
        c: &BertConfig,
        head_layers: usize,
        skip_from: usize,
    ) -> Result<Condenser> {
        if skip_from > c.num_hidden_layers {
            candle_core::bail!(
                "--skip-from {skip_from} is beyond the backbone's {} layers",
                c.num_hidden_layers
            );
        }
        Ok(Condenser {
            bert: Bert::load(vb.pp("bert"), c)?,
            head: (0..head_layers)
                .map(|i| BertLayer::load(vb.pp(format!("c_head.{i}")), c))
                .collect::<Result<_>>()?,
            mlm: MlmHead::load(vb.pp("cls.predictions"), c)?,
            skip_from,
            head_mlm: true,
        })
    }

    /// The head's input: the last layer's `[CLS]` followed by layer `skip_from`'s states at 1.. .
    pub fn head_input(&self, states: &[Tensor]) -> Result<Tensor> {
        let last = states.last().unwrap();
        let early = &states[self.skip_from];
        let s = early.dim(1)?;
        Tensor::cat(&[&last.narrow(1, 0, 1)?, &early.narrow(1, 1, s - 1)?], 1)
    }

    /// Vocabulary logits at the masked positions: of the head's states, and of the last layer's
    /// (late MLM) where given. Both go through the MLM head in one pass: one vocabulary-sized
    /// GEMM, and one dense gradient of the tied word embeddings instead of two.
    pub fn mlm_logits(
        &self,
        head: Option<&Tensor>,
        late: Option<&Tensor>,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let words = self.bert.embeddings.word_embeddings();
        Ok(match (head, late) {
            (Some(h), Some(l)) => {
                let n = h.dim(0)?;
                let both = self.mlm.forward(&Tensor::cat(&[h, l], 0)?, words)?;
                (Some(both.narrow(0, 0, n)?), Some(both.narrow(0, n, n)?))
            }
            (h, l) => (
                h.map(|h| self.mlm.forward(h, words)).transpose()?,
                l.map(|l| self.mlm.forward(l, words)).transpose()?,
            ),
        })
    }

    /// `positions` indexes the flattened (b * s) tokens that were masked.
    pub fn forward_t(
        &self,
        b: &TokenBatch,
        positions: &Tensor,
        late_mlm: bool,
        drop: Option<&Dropout>,
    ) -> Result<CondenserOutput> {
        let states = self
            .bert
            .forward_states_t(&b.ids, &b.type_ids, &b.mask, drop)?;
        let at = |t: &Tensor| -> Result<Tensor> {
            let (bs, s, h) = t.dims3()?;
            t.reshape((bs * s, h))?.index_select(positions, 0)
        };
        let head = if self.head_mlm {
            let bias = attention_bias(&b.mask, self.bert.dtype())?;
            let mut x = self.head_input(&states)?;
            for l in &self.head {
                x = l.forward_t(&x, &bias, drop)?;
            }
            Some(at(&x)?)
        } else {
            None
        };
        let last = states.last().unwrap();
        let late = if late_mlm { Some(at(last)?) } else { None };
        let (head_logits, late_logits) = self.mlm_logits(head.as_ref(), late.as_ref())?;
        Ok(CondenserOutput {
            head_logits,
            late_logits,
            cls: last.narrow(1, 0, 1)?.squeeze(1)?,
        })
    }
}
