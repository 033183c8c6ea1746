//! The engine proper: a stack of BERT layers (with the embeddings in front, or fed rows directly:
//! a Condenser head), its forward with an optional tape, and its backward into gradient buffers.
use super::super::packed::Packed;
use super::super::weights;
use super::embeddings;
use super::first_token;
use super::gemm::Gemm;
use super::grads::Grads;
use super::layer::{self, LayerTape, Pass, Sites};
use super::packed_attention::Heads;
use crate::hash::mix64;
use crate::model::kernels::blas::{blas, Blas};
use crate::model::kernels::dropout_hash::Mask;
use crate::model::kernels::precision::Precision;
use crate::model::kernels::vector::add_into;
use crate::model::{Activation, Bert, BertEmbeddings, BertLayer, Dropout};
use candle_core::{DType, Result, Tensor};

/// CONDENSER_ENGINE=off trains through candle's graph instead (to compare the two, or to rule
/// the engine out); on, or unset, uses the engine where it applies.
pub fn enabled() -> bool {
    crate::settings::get().engine == crate::settings::Switch::On
}

/// What a forward keeps for backward.
struct Tape {
    emb: Option<embeddings::EmbTape>,
    layers: Vec<LayerTape>,
}

/// A forward's result: the last layer's rows (packed), and the tape when kept.
pub struct Forward {
    pub packed: Packed,
    pub hidden: Vec<f32>,
    tape: Option<Tape>,
}

impl Forward {
    /// Layer k's input rows (k = 0: the embeddings' output) where the tape was kept; k = the layer
    /// count: the last layer's output.
    pub fn state(&self, k: usize) -> Option<&[f32]> {
        let layers = &self.tape.as_ref()?.layers;
        if k == layers.len() {
            return Some(&self.hidden);
        }
        layers.get(k).map(|l| l.x.as_slice())
    }
}

/// An inference session's weights (`Stack::infer`); shared by the threads that encode.
pub struct Infer<'a> {
    engine: &'a Stack<'a>,
    emb: weights::EmbW<'a>,
    layers: Vec<weights::LayerW<'a>>,
}

impl Infer<'_> {
    /// The last layer's rows for token sequences (`types`: token types, 0 where None).
    pub fn forward(&self, ids: &[&[u32]], types: Option<&[&[u32]]>) -> Result<Forward> {
        self.forward_t(ids, types, None, None, Pass::Infer)
    }

    /// The last layer's rows at each sequence's first token only (items x hidden), for heads that
    /// read `[CLS]` alone: the last layer skips every other row (first_token.rs). Equal to
    /// `forward`'s first rows up to the products' rounding.
    pub fn forward_first(&self, ids: &[&[u32]], types: Option<&[&[u32]]>) -> Result<Vec<f32>> {
        let Some((last, rest)) = self.layers.split_last() else {
            let fwd = self.forward(ids, types)?;
            return Ok(fwd.packed.first_rows(&fwd.hidden));
        };
        let packed = Packed::of(ids, None)?;
        embeddings::check(&self.emb, ids, types)?;
        let (x, _) = embeddings::forward(&self.emb, ids, types, &packed, None, false);
        let e = self.engine;
        let fwd = e.run_layers(rest, x, None, packed, None, Pass::Infer)?;
        first_token::forward(e.gemm(), last, &fwd.hidden, &fwd.packed, e.heads)
    }

    /// `Stack::forward` on these weights.
    fn forward_t(
        &self,
        ids: &[&[u32]],
        types: Option<&[&[u32]]>,
        keys: Option<&[u64]>,
        drop: Option<&Dropout>,
        pass: Pass,
    ) -> Result<Forward> {
        let packed = Packed::of(ids, keys)?;
        embeddings::check(&self.emb, ids, types)?;
        let mask = Stack::mask(drop, 0, false);
        let keep = pass.keeps();
        let (x, et) = embeddings::forward(&self.emb, ids, types, &packed, mask.as_ref(), keep);
        self.engine
            .run_layers(&self.layers, x, et, packed, drop, pass)
    }
}

/// A stack of BERT layers (with the embeddings in front, or fed rows directly: a Condenser head).
pub struct Stack<'m> {
    emb: Option<&'m BertEmbeddings>,
    layers: &'m [BertLayer],
    heads: Heads,
    precision: Precision,
    blas: &'static Blas,
}

impl<'m> Stack<'m> {
    /// The engine for `bert`, or None where it does not apply (another device or dtype, no BLAS,
    /// an activation other than BERT's erf GELU): the caller then trains through candle.
    pub fn for_bert(bert: &'m Bert) -> Option<Stack<'m>> {
        Self::build(Some(&bert.embeddings), &bert.layers, bert.precision())
    }

    /// The engine for layers fed rows directly (no embeddings).
    pub fn for_layers(layers: &'m [BertLayer], precision: Precision) -> Option<Stack<'m>> {
        Self::build(None, layers, precision)
    }

    /// Why the engine does not run these layers, in words for a summary (None: it does).
    pub fn declines(layers: &[BertLayer]) -> Option<String> {
        let Some(first) = layers.first() else {
            return Some("no layers".into());
        };
        let w = &first.intermediate.weight;
        if !enabled() {
            Some("CONDENSER_ENGINE=off".into())
        } else if !w.device().is_cpu() {
            Some("the model is not on the CPU".into())
        } else if w.dtype() != DType::F32 {
            Some(format!("its weights are {:?}, not f32", w.dtype()))
        } else if let Some(l) = layers.iter().find(|l| l.act != Activation::Gelu) {
            Some(format!(
                "its activation is {:?} (the engine runs BERT's erf GELU)",
                l.act
            ))
        } else if blas().is_none() {
            Some("no BLAS was loaded".into())
        } else {
            None
        }
    }

    fn build(
        emb: Option<&'m BertEmbeddings>,
        layers: &'m [BertLayer],
        precision: Precision,
    ) -> Option<Stack<'m>> {
        if Self::declines(layers).is_some() {
            return None;
        }
        let first = layers.first()?;
        let blas = blas()?;
        Some(Stack {
            emb,
            layers,
            heads: Heads {
                heads: first.attention.heads,
                dim: first.attention.head_dim,
                scale: 1.0 / (first.attention.head_dim as f32).sqrt(),
            },
            precision,
            blas,
        })
    }

    fn gemm(&self) -> Gemm<'static> {
        Gemm {
            blas: self.blas,
            precision: self.precision,
        }
    }

    /// Zeroed gradient buffers for this stack's parameters (grads.rs).
    pub fn zero_grads(&self) -> Result<Grads> {
        Grads::zeros(self.emb, self.layers)
    }

    /// Each parameter (the model's tensor, a Var) with its accumulated gradient, as tensors.
    pub fn export(&self, grads: Grads) -> Result<Vec<(Tensor, Tensor)>> {
        grads.export(self.emb, self.layers)
    }

    /// Each dropout site's mask: the embeddings' is site 0, layer l's are 1 + 3l, 2 + 3l, 3 + 3l;
    /// a head's input (the cross-encoder's classifier) takes a site of its own beyond them.
    pub fn mask(drop: Option<&Dropout>, site: u64, attention: bool) -> Option<Mask> {
        let d = drop?;
        let p = if attention {
            d.rates.attention
        } else {
            d.rates.hidden
        };
        Mask::new(mix64(d.seed() ^ mix64(site.wrapping_add(0x5eed))), p)
    }

    pub(in crate::model::engine) fn sites(drop: Option<&Dropout>, l: usize) -> Sites {
        let base = 1 + 3 * l as u64;
        Sites {
            attention: Self::mask(drop, base, true),
            attention_out: Self::mask(drop, base + 1, false),
            ffn_out: Self::mask(drop, base + 2, false),
        }
    }

    /// Forward of token sequences (`types`: token types, 0 where None) through the embeddings and
    /// every layer; `keys` name each sequence for its dropout masks (an example, or an example's
    /// column; by place in the batch where None); `keep` keeps the tape for `backward`. Token,
    /// position and type ids outside the model's tables are an error.
    pub fn forward(
        &self,
        ids: &[&[u32]],
        types: Option<&[&[u32]]>,
        keys: Option<&[u64]>,
        drop: Option<&Dropout>,
        keep: bool,
    ) -> Result<Forward> {
        // a training pass even without a tape (GradCache's first pass): its embeddings must
        // equal the ones recomputed with the tape, so it takes the same f32 attention
        self.infer(|run| run.forward_t(ids, types, keys, drop, Pass::Train { keep }))
    }

    /// `f` runs any number of forwards (`Infer::forward`: inference, no tape, no dropout) on the
    /// weights read once, q, k and v concatenated once, rather than once a batch.
    pub fn infer<R>(&self, f: impl FnOnce(&Infer) -> Result<R>) -> Result<R> {
        let Some(emb) = self.emb else {
            candle_core::bail!("engine: these layers take rows, not tokens (forward_rows)")
        };
        weights::with_weights(Some(emb), self.layers, |e, layers| {
            f(&Infer {
                engine: self,
                emb: e.expect("embeddings given"),
                layers,
            })
        })
    }

    /// Forward of rows (packed as `packed`, `hidden` wide) through the layers alone.
    pub fn forward_rows(
        &self,
        x: Vec<f32>,
        packed: Packed,
        drop: Option<&Dropout>,
        keep: bool,
    ) -> Result<Forward> {
        let h = self.heads.heads * self.heads.dim;
        if x.len() != packed.rows() * h {
            candle_core::bail!(
                "engine: {} values for {} rows of {h}",
                x.len(),
                packed.rows()
            );
        }
        weights::with_weights(None, self.layers, |_, ls| {
            self.run_layers(&ls, x, None, packed, drop, Pass::Train { keep })
        })
    }

    fn run_layers(
        &self,
        ls: &[weights::LayerW],
        mut x: Vec<f32>,
        emb: Option<embeddings::EmbTape>,
        packed: Packed,
        drop: Option<&Dropout>,
        pass: Pass,
    ) -> Result<Forward> {
        let keep = pass.keeps();
        let mut tapes = Vec::with_capacity(ls.len());
        for (l, w) in ls.iter().enumerate() {
            let (y, tape) = layer::forward(
                self.gemm(),
                w,
                x,
                &packed,
                self.heads,
                &Self::sites(drop, l),
                pass,
            )?;
            tapes.extend(tape);
            x = y;
        }
        Ok(Forward {
            packed,
            hidden: x,
            tape: keep.then_some(Tape { emb, layers: tapes }),
        })
    }

    /// Backward of `fwd` (its tape kept) from the gradient of its last layer's rows, plus
    /// `extra` gradients of layer inputs (index as `Forward::state`); accumulates into `grads` and
    /// returns the gradient of the input rows when the stack has no embeddings.
    pub fn backward(
        &self,
        fwd: Forward,
        dhidden: Vec<f32>,
        extra: Vec<(usize, Vec<f32>)>,
        drop: Option<&Dropout>,
        grads: &mut Grads,
    ) -> Result<Option<Vec<f32>>> {
        let Some(tape) = fwd.tape else {
            candle_core::bail!("engine: backward of a forward that kept no tape")
        };
        let p = fwd.packed;
        weights::with_weights(self.emb, self.layers, |e, ls| {
            let mut d = dhidden;
            let add = |d: &mut Vec<f32>, k: usize| {
                for (at, g) in &extra {
                    if *at == k {
                        add_into(d, g);
                    }
                }
            };
            add(&mut d, ls.len());
            for (l, (tp, w)) in tape.layers.into_iter().zip(&ls).enumerate().rev() {
                let sites = Self::sites(drop, l);
                d = layer::backward(
                    self.gemm(),
                    w,
                    tp,
                    &d,
                    &p,
                    self.heads,
                    &sites,
                    &mut grads.layers[l],
                )?;
                add(&mut d, l);
            }
            match (e, tape.emb, grads.emb.as_mut()) {
                (Some(e), Some(et), Some(g)) => {
                    embeddings::backward(&e, et, d, &p, Self::mask(drop, 0, false).as_ref(), g);
                    Ok(None)
                }
                _ => Ok(Some(d)),
            }
        })
    }
}
