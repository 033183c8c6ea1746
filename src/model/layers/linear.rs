//! The Linear layer (HF's weight layout) over the fused op of kernels/linear.rs.
use crate::model::kernels::linear::{fusable, lowp_usable, FusedLinear};
use crate::model::kernels::matmul::{matmul, rows_of};
use crate::model::kernels::precision::{PackedWeight, Precision};
use candle_core::{DType, Module, Result, Tensor};
use candle_nn::VarBuilder;
use std::sync::Arc;

/// y = x W^T + b, with HF's weight layout (out, in), through `matmul` (BLAS on CPU), or in a
/// lower precision (model/kernels/precision.rs) after `set_precision`.
#[derive(Clone, Debug)]
pub struct Linear {
    pub weight: Tensor,
    pub bias: Option<Tensor>,
    precision: Precision,
    /// The weight made ready for bf16 products (or, where it is chosen, for the f32 kernel of
    /// kernels/f32_gemm/), once, when it is frozen (inference); a trained weight changes every
    /// step and is converted inside each product instead.
    packed: Option<Arc<PackedWeight>>,
}

impl Linear {
    pub fn new(weight: Tensor, bias: Option<Tensor>) -> Linear {
        Linear {
            weight,
            bias,
            precision: Precision::F32,
            packed: None,
        }
    }

    pub fn precision(&self) -> Precision {
        self.precision
    }

    /// The frozen weight made ready for its products (None: a trained weight, f16, or f32 where
    /// the BLAS runs it).
    pub fn packed(&self) -> Option<&Arc<PackedWeight>> {
        self.packed.as_ref()
    }

    /// Run this layer's products in `p` from now on (callers check the CPU first:
    /// `Precision::check_cpu`). A lower precision applies on the CPU to f32 weights only.
    pub fn set_precision(&mut self, p: Precision) -> Result<()> {
        self.precision = p;
        self.packed = None;
        if PackedWeight::takes_ready(p) && self.frozen_cpu() {
            let (out, inp) = self.weight.dims2()?;
            let w = self.weight.flatten_all()?.to_vec1::<f32>()?;
            self.packed = PackedWeight::ready(p, &w, out, inp).map(Arc::new);
        }
        Ok(())
    }

    /// `set_precision` without making the weight ready: for q, k and v, whose f32 weights the
    /// attention packs once as one (3 hidden x hidden) product instead.
    pub(crate) fn set_precision_unpacked(&mut self, p: Precision) {
        self.precision = p;
        self.packed = None;
    }

    /// A frozen (not trained) f32 weight on the CPU: one that can be made ready once.
    pub(crate) fn frozen_cpu(&self) -> bool {
        !self.weight.is_variable() && lowp_usable(&self.weight)
    }

    /// This layer with precision `p` (see `set_precision`).
    pub fn with_precision(mut self, p: Precision) -> Result<Linear> {
        self.set_precision(p)?;
        Ok(self)
    }

    /// Weights initialised as BERT does (normal 0.02, zero bias) where the checkpoint lacks them.
    pub fn load(vb: VarBuilder, inp: usize, out: usize) -> Result<Linear> {
        let weight = vb.get_with_hints(
            (out, inp),
            "weight",
            candle_nn::Init::Randn {
                mean: 0.0,
                stdev: 0.02,
            },
        )?;
        let bias = vb.get_with_hints(out, "bias", candle_nn::Init::Const(0.0))?;
        Ok(Linear::new(weight, Some(bias)))
    }
}

impl Module for Linear {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let dims = x.dims().to_vec();
        let inp = *dims.last().unwrap();
        let rows = x.elem_count() / inp.max(1);
        let mut out_dims = dims.clone();
        *out_dims.last_mut().unwrap() = self.weight.dim(0)?;
        let op = FusedLinear::new(self.precision, self.packed.clone());
        if self.precision != Precision::F32 && lowp_usable(x) && lowp_usable(&self.weight) {
            let zeros;
            let b = match &self.bias {
                Some(b) => b,
                None => {
                    zeros = Tensor::zeros(self.weight.dim(0)?, DType::F32, x.device())?;
                    &zeros
                }
            };
            return x
                .contiguous()?
                .apply_op3(&self.weight.contiguous()?, &b.contiguous()?, op);
        }
        if let Some(b) = self.bias.as_ref().filter(|b| fusable(x, &self.weight, b)) {
            // any leading dims: the op reads x as (rows, in), so no reshape nodes join the graph
            return x
                .contiguous()?
                .apply_op3(&self.weight.contiguous()?, &b.contiguous()?, op);
        }
        let mut y = matmul(&x.reshape((rows, inp))?, &self.weight.t()?)?;
        if let Some(b) = &self.bias {
            y = y.add(&rows_of(b, rows)?)?;
        }
        y.reshape(out_dims)
    }
}
