use super::matmul::{matmul, rows_of};
use candle_core::{Module, Result, Tensor};
use candle_nn::VarBuilder;

/// y = x W^T + b, with HF's weight layout (out, in), through `matmul` (BLAS on CPU).
#[derive(Clone, Debug)]
pub struct Linear {
    pub weight: Tensor,
    pub bias: Option<Tensor>,
}

impl Linear {
    pub fn new(weight: Tensor, bias: Option<Tensor>) -> Linear {
        Linear { weight, bias }
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
        Ok(Linear {
            weight,
            bias: Some(bias),
        })
    }
}

impl Module for Linear {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let dims = x.dims().to_vec();
        let inp = *dims.last().unwrap();
        let rows = x.elem_count() / inp.max(1);
        let mut y = matmul(&x.reshape((rows, inp))?, &self.weight.t()?)?;
        if let Some(b) = &self.bias {
            y = y.add(&rows_of(b, rows)?)?;
        }
        let mut out_dims = dims;
        *out_dims.last_mut().unwrap() = self.weight.dim(0)?;
        y.reshape(out_dims)
    }
}
