//! The CPU engine's gradients: host buffers for every parameter of a stack, accumulated in place
//! by backward (GEMM beta 1) over any number of passes, and handed to candle as tensors at the
//! end of a step (gpu/grads.rs is the GPU's: one arena, exported as views).
use super::embeddings::EmbGrads;
use super::layer::LayerGrads;
use crate::model::engine::weights;
use crate::model::{BertEmbeddings, BertLayer};
use candle_core::{Result, Tensor};

/// Gradients of an engine's parameters, accumulated over any number of backward passes.
pub struct Grads {
    pub emb: Option<EmbGrads>,
    pub layers: Vec<LayerGrads>,
}

impl Grads {
    /// Zeroed buffers for the parameters of `emb` and `layers` (a stack's).
    pub(super) fn zeros(emb: Option<&BertEmbeddings>, layers: &[BertLayer]) -> Result<Grads> {
        weights::with_weights(emb, layers, |e, ls| {
            Ok(Grads {
                emb: e.as_ref().map(EmbGrads::zeros),
                layers: ls
                    .iter()
                    .map(|w| LayerGrads::zeros(w.g1.len(), w.bi.len()))
                    .collect(),
            })
        })
    }

    /// Each parameter (the model's tensor, a Var) with its gradient here, as tensors.
    pub(super) fn export(
        self,
        emb: Option<&BertEmbeddings>,
        layers: &[BertLayer],
    ) -> Result<Vec<(Tensor, Tensor)>> {
        let grads = self;
        let mut out = Vec::new();
        let dev = candle_core::Device::Cpu;
        if let (Some(e), Some(g)) = (emb, grads.emb) {
            let ts = weights::embedding_tensors(e);
            for (t, v) in ts.into_iter().zip([g.word, g.pos, g.typ, g.g, g.b]) {
                out.push((t.clone(), Tensor::from_vec(v, t.shape(), &dev)?));
            }
        }
        for (l, g) in layers.iter().zip(grads.layers) {
            let ts = weights::layer_tensors(l)?;
            let n = g.bqkv.len() / 3;
            let (wq, bq) = (g.wqkv.chunks_exact(n * n), g.bqkv.chunks_exact(n));
            let mut vs: Vec<Vec<f32>> = Vec::with_capacity(16);
            for (w, b) in wq.zip(bq) {
                vs.push(w.to_vec());
                vs.push(b.to_vec());
            }
            vs.extend([g.wo, g.bo, g.g1, g.b1, g.wi, g.bi, g.wd, g.bd, g.g2, g.b2]);
            for (t, v) in ts.into_iter().zip(vs) {
                out.push((t.clone(), Tensor::from_vec(v, t.shape(), &dev)?));
            }
        }
        Ok(out)
    }
}
