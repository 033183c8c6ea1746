//! BERT encoder in candle-nn style: one struct per layer, weights by HF name through VarBuilder,
//! every layer's hidden states readable (Condenser reads layer k's tokens and the last CLS).
use super::config::{Activation, BertConfig};
use super::linear::Linear;
use super::norm::LayerNorm;
use crate::model::kernels::dropout::{maybe, maybe_attention, Dropout};
use crate::model::kernels::precision::{PackedWeight, Precision};
use crate::model::kernels::{blas, matmul::matmul, padded_attention, softmax::masked_softmax};
use candle_core::{DType, Module, Result, Tensor};
use candle_nn::{embedding, Embedding, VarBuilder};
use std::sync::Arc;

pub struct BertEmbeddings {
    pub(crate) word: Embedding,
    pub(crate) position: Embedding,
    pub(crate) token_type: Embedding,
    pub(crate) norm: LayerNorm,
}

impl BertEmbeddings {
    pub fn load(vb: VarBuilder, c: &BertConfig) -> Result<Self> {
        Ok(BertEmbeddings {
            word: embedding(c.vocab_size, c.hidden_size, vb.pp("word_embeddings"))?,
            position: embedding(
                c.max_position_embeddings,
                c.hidden_size,
                vb.pp("position_embeddings"),
            )?,
            token_type: embedding(
                c.type_vocab_size,
                c.hidden_size,
                vb.pp("token_type_embeddings"),
            )?,
            norm: LayerNorm::load(vb.pp("LayerNorm"), c.hidden_size, c.layer_norm_eps)?,
        })
    }

    /// The word embedding matrix (an MLM decoder ties to it).
    pub fn word_embeddings(&self) -> &Tensor {
        self.word.embeddings()
    }

    pub fn forward(&self, ids: &Tensor, type_ids: &Tensor) -> Result<Tensor> {
        self.forward_t(ids, type_ids, None)
    }

    pub fn forward_t(
        &self,
        ids: &Tensor,
        type_ids: &Tensor,
        drop: Option<&Dropout>,
    ) -> Result<Tensor> {
        let len = ids.dim(1)?;
        let pos = Tensor::arange(0u32, len as u32, ids.device())?;
        let x = self
            .word
            .forward(ids)?
            .add(&self.token_type.forward(type_ids)?)?;
        maybe(
            drop,
            self.norm
                .forward(&x.broadcast_add(&self.position.forward(&pos)?)?)?,
        )
    }
}

pub struct SelfAttention {
    pub(crate) query: Linear,
    pub(crate) key: Linear,
    pub(crate) value: Linear,
    pub(crate) out: Linear,
    pub(crate) norm: LayerNorm,
    pub(crate) heads: usize,
    pub(crate) head_dim: usize,
    /// q, k and v's frozen weights made ready once as one (3 hidden x hidden) weight, for the f32
    /// kernel (kernels/f32_gemm/) where that route is taken and for bf16 (one product of 3 hidden
    /// columns starting at the bias, not three added to a bias-filled buffer); their Linears then
    /// hold none.
    pub(crate) qkv_packed: Option<Arc<PackedWeight>>,
}

impl SelfAttention {
    pub fn load(vb: VarBuilder, c: &BertConfig) -> Result<Self> {
        let h = c.hidden_size;
        let s = vb.pp("self");
        Ok(SelfAttention {
            query: Linear::load(s.pp("query"), h, h)?,
            key: Linear::load(s.pp("key"), h, h)?,
            value: Linear::load(s.pp("value"), h, h)?,
            out: Linear::load(vb.pp("output").pp("dense"), h, h)?,
            norm: LayerNorm::load(vb.pp("output").pp("LayerNorm"), h, c.layer_norm_eps)?,
            heads: c.num_attention_heads,
            head_dim: c.head_dim(),
            qkv_packed: None,
        })
    }

    pub fn set_precision(&mut self, p: Precision) -> Result<()> {
        self.qkv_packed = None;
        let qkv = [&self.query, &self.key, &self.value];
        if PackedWeight::takes_ready(p) && qkv.iter().all(|l| l.frozen_cpu()) {
            let (h, k) = self.query.weight.dims2()?;
            let w = Tensor::cat(&qkv.map(|l| &l.weight), 0)?
                .flatten_all()?
                .to_vec1::<f32>()?;
            self.qkv_packed = PackedWeight::ready(p, &w, 3 * h, k).map(Arc::new);
            for l in [&mut self.query, &mut self.key, &mut self.value] {
                l.set_precision_unpacked(p);
            }
        } else {
            for l in [&mut self.query, &mut self.key, &mut self.value] {
                l.set_precision(p)?;
            }
        }
        self.out.set_precision(p)
    }

    /// (b, s, h) -> (b, heads, s, head_dim)
    fn split(&self, x: &Tensor) -> Result<Tensor> {
        let (b, s, _) = x.dims3()?;
        x.reshape((b, s, self.heads, self.head_dim))?
            .transpose(1, 2)?
            .contiguous()
    }

    /// The layer's output. `bias` is the additive mask (b, 1, 1, s): 0 for tokens, a large
    /// negative number for padding. On CPU f32 with BLAS the attention core is one fused op
    /// (model/kernels/padded_attention.rs); elsewhere the composed form.
    pub fn forward_t(&self, x: &Tensor, bias: &Tensor, drop: Option<&Dropout>) -> Result<Tensor> {
        if !padded_attention::usable(x) {
            return Ok(self.forward_with_probs(x, bias, drop)?.1);
        }
        let (b, s, _) = x.dims3()?;
        let q = self.query.forward(x)?;
        let k = self.key.forward(x)?;
        let v = self.value.forward(x)?;
        let mask = drop.and_then(|d| d.attention_mask(b * self.heads * s * s));
        let scale = 1.0 / (self.head_dim as f64).sqrt();
        let ctx = padded_attention::attention(&q, &k, &v, bias, self.heads, scale, mask)?;
        self.norm
            .forward(&(maybe(drop, self.out.forward(&ctx)?)? + x)?)
    }

    /// Attention probabilities (b, heads, s, s) and the layer's output, composed from tensor ops
    /// (the analysis reads the probabilities).
    pub fn forward_with_probs(
        &self,
        x: &Tensor,
        bias: &Tensor,
        drop: Option<&Dropout>,
    ) -> Result<(Tensor, Tensor)> {
        let (b, s, h) = x.dims3()?;
        let q = self.split(&self.query.forward(x)?)?;
        let k = self.split(&self.key.forward(x)?)?;
        let v = self.split(&self.value.forward(x)?)?;
        let scores = matmul(&q, &k.t()?)?;
        let probs = masked_softmax(&scores, bias, 1.0 / (self.head_dim as f64).sqrt())?;
        let ctx = matmul(&maybe_attention(drop, probs.clone())?, &v)?
            .transpose(1, 2)?
            .reshape((b, s, h))?;
        let y = self
            .norm
            .forward(&(maybe(drop, self.out.forward(&ctx)?)? + x)?)?;
        Ok((probs, y))
    }
}

pub struct BertLayer {
    pub(crate) attention: SelfAttention,
    pub(crate) intermediate: Linear,
    pub(crate) output: Linear,
    pub(crate) norm: LayerNorm,
    pub(crate) act: Activation,
}

impl BertLayer {
    pub fn load(vb: VarBuilder, c: &BertConfig) -> Result<Self> {
        Ok(BertLayer {
            attention: SelfAttention::load(vb.pp("attention"), c)?,
            intermediate: Linear::load(
                vb.pp("intermediate").pp("dense"),
                c.hidden_size,
                c.intermediate_size,
            )?,
            output: Linear::load(
                vb.pp("output").pp("dense"),
                c.intermediate_size,
                c.hidden_size,
            )?,
            norm: LayerNorm::load(
                vb.pp("output").pp("LayerNorm"),
                c.hidden_size,
                c.layer_norm_eps,
            )?,
            act: c.hidden_act,
        })
    }

    pub fn set_precision(&mut self, p: Precision) -> Result<()> {
        self.attention.set_precision(p)?;
        self.intermediate.set_precision(p)?;
        self.output.set_precision(p)
    }

    pub fn forward_with_probs(
        &self,
        x: &Tensor,
        bias: &Tensor,
        drop: Option<&Dropout>,
    ) -> Result<(Tensor, Tensor)> {
        let (probs, a) = self.attention.forward_with_probs(x, bias, drop)?;
        Ok((probs, self.feed_forward(&a, drop)?))
    }

    /// The layer's output, through the fused attention where it applies.
    pub fn forward_t(&self, x: &Tensor, bias: &Tensor, drop: Option<&Dropout>) -> Result<Tensor> {
        let a = self.attention.forward_t(x, bias, drop)?;
        self.feed_forward(&a, drop)
    }

    fn feed_forward(&self, a: &Tensor, drop: Option<&Dropout>) -> Result<Tensor> {
        let i = self.act.forward(&self.intermediate.forward(a)?)?;
        self.norm
            .forward(&(maybe(drop, self.output.forward(&i)?)? + a)?)
    }

    pub fn forward(&self, x: &Tensor, bias: &Tensor) -> Result<Tensor> {
        self.forward_t(x, bias, None)
    }
}

/// The additive attention bias from a (b, s) 0/1 mask: (b, 1, 1, s), 0 where attended and the
/// dtype's most negative finite value where padded (as transformers does).
pub fn attention_bias(mask: &Tensor, dtype: DType) -> Result<Tensor> {
    let (b, s) = mask.dims2()?;
    let big = match dtype {
        DType::F16 => 65504.0,
        DType::BF16 => 3.38e38,
        _ => f32::MAX as f64,
    };
    // mask * big - big: exactly 0 for 1, -big for 0
    mask.to_dtype(DType::F32)?
        .affine(big, -big)?
        .to_dtype(dtype)?
        .reshape((b, 1, 1, s))
}

pub struct Bert {
    pub embeddings: BertEmbeddings,
    pub layers: Vec<BertLayer>,
    pub config: BertConfig,
}

impl Bert {
    pub fn load(vb: VarBuilder, c: &BertConfig) -> Result<Self> {
        // settle BLAS (and the thread settings it implies) before the first tensor op runs
        let _ = blas::blas();
        let embeddings = BertEmbeddings::load(vb.pp("embeddings"), c)?;
        let layers = (0..c.num_hidden_layers)
            .map(|i| BertLayer::load(vb.pp(format!("encoder.layer.{i}")), c))
            .collect::<Result<_>>()?;
        Ok(Bert {
            embeddings,
            layers,
            config: c.clone(),
        })
    }

    /// Every encoder Linear's precision (model/kernels/precision.rs); embeddings and norms stay f32.
    pub fn set_precision(&mut self, p: Precision) -> Result<()> {
        self.layers
            .iter_mut()
            .try_for_each(|l| l.set_precision(p))?;
        // the last layer's query also alone: the [CLS]-only forward (engine/cpu/first_token.rs: a
        // cross-encoder's scores, CLS pooling) projects one row an item by q, not by q, k and v
        if let Some(last) = self.layers.last_mut() {
            if last.attention.qkv_packed.is_some() {
                last.attention.query.set_precision(p)?;
            }
        }
        Ok(())
    }

    /// Whether the last layer's query holds a ready weight (the `[CLS]`-only forward's q).
    pub fn first_token_query_ready(&self) -> bool {
        self.layers
            .last()
            .is_some_and(|l| l.attention.query.packed().is_some())
    }

    /// The precision of the encoder's products.
    pub fn precision(&self) -> Precision {
        self.layers
            .first()
            .map_or(Precision::F32, |l| l.intermediate.precision())
    }

    pub fn dtype(&self) -> DType {
        self.embeddings.word_embeddings().dtype()
    }

    /// The last layer's hidden states (b, s, h).
    pub fn forward(&self, ids: &Tensor, type_ids: &Tensor, mask: &Tensor) -> Result<Tensor> {
        self.forward_t(ids, type_ids, mask, None)
    }

    /// As `forward`, with dropout when training.
    pub fn forward_t(
        &self,
        ids: &Tensor,
        type_ids: &Tensor,
        mask: &Tensor,
        drop: Option<&Dropout>,
    ) -> Result<Tensor> {
        let bias = attention_bias(mask, self.dtype())?;
        let mut x = self.embeddings.forward_t(ids, type_ids, drop)?;
        for l in &self.layers {
            x = l.forward_t(&x, &bias, drop)?;
        }
        Ok(x)
    }

    /// Hidden states of every layer with dropout when training: [embeddings, layer 1, ..., layer N].
    pub fn forward_states_t(
        &self,
        ids: &Tensor,
        type_ids: &Tensor,
        mask: &Tensor,
        drop: Option<&Dropout>,
    ) -> Result<Vec<Tensor>> {
        let bias = attention_bias(mask, self.dtype())?;
        let mut states = vec![self.embeddings.forward_t(ids, type_ids, drop)?];
        for l in &self.layers {
            let y = l.forward_t(states.last().unwrap(), &bias, drop)?;
            states.push(y);
        }
        Ok(states)
    }

    /// Hidden states of every layer: [embeddings, layer 1, ..., layer N] (index k = output of the
    /// k-th encoder layer), and each layer's attention probabilities.
    pub fn forward_all(
        &self,
        ids: &Tensor,
        type_ids: &Tensor,
        mask: &Tensor,
    ) -> Result<(Vec<Tensor>, Vec<Tensor>)> {
        let bias = attention_bias(mask, self.dtype())?;
        let mut states = vec![self.embeddings.forward(ids, type_ids)?];
        let mut probs = Vec::with_capacity(self.layers.len());
        for l in &self.layers {
            let (p, y) = l.forward_with_probs(states.last().unwrap(), &bias, None)?;
            probs.push(p);
            states.push(y);
        }
        Ok((states, probs))
    }
}
