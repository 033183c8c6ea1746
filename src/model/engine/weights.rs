//! The model's weights as f32 slices for the engine: every tensor's CPU storage is read-locked for
//! the duration of a forward or backward (the optimizer writes only between steps), so nothing is
//! copied but the q, k and v projections, concatenated once a call into one (3 hidden x hidden)
//! matrix so that they run as one GEMM.
use crate::model::kernels::precision::PackedWeight;
use crate::model::{BertEmbeddings, BertLayer};
use candle_core::{bail, Result, Storage, Tensor};
use std::sync::Arc;

/// One layer's weights (HF layout: a Linear's weight is (out, in)).
pub struct LayerW<'s> {
    /// The frozen weights made ready for their products (inference: the Linears hold them), in
    /// the order q, k, v, o, intermediate, output; None when training, or in f32 where the BLAS
    /// runs them (and q, k, v where `qkv` holds them as one).
    pub packed: [Option<Arc<PackedWeight>>; 6],
    /// q, k and v made ready as one (3h x h) weight (f32 on the AVX2 kernel), if they are.
    pub qkv: Option<Arc<PackedWeight>>,
    pub wqkv: Vec<f32>,
    pub bqkv: Vec<f32>,
    pub wo: &'s [f32],
    pub bo: &'s [f32],
    pub g1: &'s [f32],
    pub b1: &'s [f32],
    pub wi: &'s [f32],
    pub bi: &'s [f32],
    pub wd: &'s [f32],
    pub bd: &'s [f32],
    pub g2: &'s [f32],
    pub b2: &'s [f32],
    pub eps1: f32,
    pub eps2: f32,
}

pub struct EmbW<'s> {
    pub word: &'s [f32],
    pub pos: &'s [f32],
    pub typ: &'s [f32],
    pub g: &'s [f32],
    pub b: &'s [f32],
    pub eps: f32,
}

/// The 16 tensors of a layer, in the order `LayerW` takes them (and gradients are reported).
pub fn layer_tensors(l: &BertLayer) -> Result<[&Tensor; 16]> {
    let a = &l.attention;
    fn bias(x: &crate::model::Linear) -> Result<&Tensor> {
        match &x.bias {
            Some(b) => Ok(b),
            None => bail!("engine: a BERT Linear without a bias"),
        }
    }
    Ok([
        &a.query.weight,
        bias(&a.query)?,
        &a.key.weight,
        bias(&a.key)?,
        &a.value.weight,
        bias(&a.value)?,
        &a.out.weight,
        bias(&a.out)?,
        &a.norm.weight,
        &a.norm.bias,
        &l.intermediate.weight,
        bias(&l.intermediate)?,
        &l.output.weight,
        bias(&l.output)?,
        &l.norm.weight,
        &l.norm.bias,
    ])
}

/// The 5 tensors of the embeddings: word, position, token type, LayerNorm weight and bias.
pub fn embedding_tensors(e: &BertEmbeddings) -> [&Tensor; 5] {
    [
        e.word.embeddings(),
        e.position.embeddings(),
        e.token_type.embeddings(),
        &e.norm.weight,
        &e.norm.bias,
    ]
}

/// The six Linears' ready weights, where they have them.
fn packed(l: &BertLayer) -> [Option<Arc<PackedWeight>>; 6] {
    let a = &l.attention;
    [
        &a.query,
        &a.key,
        &a.value,
        &a.out,
        &l.intermediate,
        &l.output,
    ]
    .map(|x| x.packed().cloned())
}

/// Run `f` on the f32 slices of `tensors` (CPU, f32, contiguous; anything else is an error).
pub fn with_slices<R>(tensors: &[&Tensor], f: impl FnOnce(&[&[f32]]) -> Result<R>) -> Result<R> {
    let guards: Vec<_> = tensors.iter().map(|t| t.storage_and_layout()).collect();
    let mut slices = Vec::with_capacity(guards.len());
    for (g, l) in &guards {
        let Storage::Cpu(cpu) = &**g else {
            bail!("engine: weights must be on the CPU")
        };
        let Some((a, b)) = l.contiguous_offsets() else {
            bail!("engine: weights must be contiguous")
        };
        slices.push(&cpu.as_slice::<f32>()?[a..b]);
    }
    f(&slices)
}

/// The weights of `layers` (and of `emb`, if given) as slices, for `f`.
pub fn with_weights<R>(
    emb: Option<&BertEmbeddings>,
    layers: &[BertLayer],
    f: impl FnOnce(Option<EmbW>, Vec<LayerW>) -> Result<R>,
) -> Result<R> {
    let mut all: Vec<&Tensor> = Vec::new();
    if let Some(e) = emb {
        all.extend(embedding_tensors(e));
    }
    for l in layers {
        all.extend(layer_tensors(l)?);
    }
    with_slices(&all, |s| {
        let (e, rest) = match emb {
            Some(e) => (
                Some(EmbW {
                    word: s[0],
                    pos: s[1],
                    typ: s[2],
                    g: s[3],
                    b: s[4],
                    eps: e.norm.eps() as f32,
                }),
                &s[5..],
            ),
            None => (None, s),
        };
        let ws = rest
            .chunks_exact(16)
            .zip(layers)
            .map(|(w, l)| LayerW {
                packed: packed(l),
                qkv: l.attention.qkv_packed.clone(),
                wqkv: [w[0], w[2], w[4]].concat(),
                bqkv: [w[1], w[3], w[5]].concat(),
                wo: w[6],
                bo: w[7],
                g1: w[8],
                b1: w[9],
                wi: w[10],
                bi: w[11],
                wd: w[12],
                bd: w[13],
                g2: w[14],
                b2: w[15],
                eps1: l.attention.norm.eps() as f32,
                eps2: l.norm.eps() as f32,
            })
            .collect();
        f(e, ws)
    })
}
