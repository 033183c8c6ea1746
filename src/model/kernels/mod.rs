//! Numeric kernels: the matmul libraries picked at run time (OpenBLAS, oneMKL) and condenser's own
//! bf16 and f32 kernels for frozen weights, the products in a chosen precision, the row kernels compiled per CPU class (vector
//! sums, LayerNorm, GELU, softmax, hashed dropout masks) that both CPU paths run, and the fused
//! ops with their own backward that candle's graph runs on them (Linear, padded attention,
//! LayerNorm, GELU, masked softmax), stream-drawn dropout masks, fast exp. Nothing here knows
//! BERT: the layers (../layers) and the engine (../engine) compose these.
pub mod bf16;
pub mod blas;
#[cfg(feature = "cuda")]
pub mod cuda_uniform;
pub mod dropout;
pub mod dropout_hash;
pub mod f32_gemm;
pub mod fastmath;
pub mod gelu;
pub mod head_attention;
pub mod isa;
pub mod layer_norm;
pub mod linear;
pub mod matmul;
pub mod padded_attention;
pub mod precision;
pub mod softmax;
pub mod vector;

use candle_core::{DType, Result, Tensor};

/// A custom op's f32 CPU input as one slice; `op` names the op in the error for a strided input
/// (the ops' callers make their inputs contiguous first).
pub(crate) fn contiguous_f32<'a>(
    s: &'a candle_core::CpuStorage,
    l: &candle_core::Layout,
    op: &str,
) -> Result<&'a [f32]> {
    match l.contiguous_offsets() {
        Some((a, b)) => Ok(&s.as_slice::<f32>()?[a..b]),
        None => candle_core::bail!("{op}: a contiguous input is required"),
    }
}

/// max |a - b| over all elements (tests and gradient checks compare tensors with it).
pub fn max_abs_diff(a: &Tensor, b: &Tensor) -> Result<f32> {
    (a - b)?
        .abs()?
        .flatten_all()?
        .max(0)?
        .to_dtype(DType::F32)?
        .to_scalar::<f32>()
}

/// Deterministic values in [-1, 1] (steps of 0.001) for the kernels' tests.
#[cfg(test)]
pub(crate) fn test_data(n: usize, seed: u32) -> Vec<f32> {
    (0..n as u32)
        .map(|i| ((i.wrapping_mul(2654435761) ^ seed) % 2001) as f32 / 1000.0 - 1.0)
        .collect()
}

#[cfg(test)]
mod classes_test;
