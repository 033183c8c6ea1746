//! Numeric kernels: the matmul libraries picked at run time (OpenBLAS, oneMKL) and condenser's own
//! bf16 kernel, the products in a chosen precision, and the fused CPU ops with their own backward
//! (Linear, attention core, LayerNorm, GELU, masked softmax), seeded dropout masks, fast exp.
//! Nothing here knows BERT: layers (../layers) compose these.
pub mod attention;
pub mod bf16;
pub mod blas;
pub mod dropout;
pub mod fastmath;
pub mod gelu;
pub mod isa;
pub mod layer_norm;
pub mod linear;
pub mod matmul;
pub mod precision;
pub mod softmax;

use candle_core::{DType, Result, Tensor};

/// max |a - b| over all elements (tests and gradient checks compare tensors with it).
pub fn max_abs_diff(a: &Tensor, b: &Tensor) -> Result<f32> {
    (a - b)?
        .abs()?
        .flatten_all()?
        .max(0)?
        .to_dtype(DType::F32)?
        .to_scalar::<f32>()
}
