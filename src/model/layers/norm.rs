//! LayerNorm, the layer: its weights by HF name, the fused CPU op (kernels/layer_norm.rs) where it
//! applies and differentiable tensor ops elsewhere. candle's own layer-norm kernel returns no
//! gradient (silently), so the model never uses it.
use crate::model::kernels::{layer_norm, matmul::rows_of};
use candle_core::{DType, Module, Result, Tensor, D};
use candle_nn::VarBuilder;

/// LayerNorm over the last dimension with weight and bias (HF names, or TF-era gamma/beta).
#[derive(Clone, Debug)]
pub struct LayerNorm {
    pub weight: Tensor,
    pub bias: Tensor,
    eps: f64,
}

impl LayerNorm {
    pub fn new(weight: Tensor, bias: Tensor, eps: f64) -> LayerNorm {
        LayerNorm { weight, bias, eps }
    }

    pub fn eps(&self) -> f64 {
        self.eps
    }

    pub fn load(vb: VarBuilder, size: usize, eps: f64) -> Result<LayerNorm> {
        let (w, b) = if vb.contains_tensor("gamma") {
            ("gamma", "beta")
        } else {
            ("weight", "bias")
        };
        let weight = vb.get_with_hints(size, w, candle_nn::Init::Const(1.0))?;
        let bias = vb.get_with_hints(size, b, candle_nn::Init::Const(0.0))?;
        Ok(LayerNorm { weight, bias, eps })
    }
}

impl Module for LayerNorm {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        if layer_norm::usable(x, &self.weight, &self.bias) {
            return layer_norm::layer_norm(x, &self.weight, &self.bias, self.eps);
        }
        self.composed(x)
    }
}

impl LayerNorm {
    /// The same LayerNorm from differentiable tensor ops: half precision and GPUs use it, and the
    /// tests compare the fused op with it.
    pub fn composed(&self, x: &Tensor) -> Result<Tensor> {
        let dtype = x.dtype();
        // statistics in f32 even for bf16/f16 activations, as PyTorch does
        let x = if dtype == DType::F32 {
            x.clone()
        } else {
            x.to_dtype(DType::F32)?
        };
        let mean = x.mean_keepdim(D::Minus1)?;
        let centered = x.broadcast_sub(&mean)?;
        let var = centered.sqr()?.mean_keepdim(D::Minus1)?;
        let normed = centered
            .broadcast_div(&(var + self.eps)?.sqrt()?)?
            .to_dtype(dtype)?;
        // scale and shift as (rows, h): the parameters' gradients then come from sgemm (rows_of)
        let dims = normed.dims().to_vec();
        let h = *dims.last().unwrap();
        let rows = normed.elem_count() / h.max(1);
        let y = normed
            .reshape((rows, h))?
            .mul(&rows_of(&self.weight, rows)?)?
            .add(&rows_of(&self.bias, rows)?)?;
        y.reshape(dims)
    }
}
