//! x W^T + b as one CPU op with its own backward (the Linear layer's product).
use super::bf16::MatRef;
use super::blas::{blas, NO_TRANS, TRANS};
use super::contiguous_f32;
use super::matmul::matmul;
use super::precision::{self, PackedWeight, Precision};
use candle_core::{CpuStorage, CustomOp3, DType, Layout, Result, Shape, Tensor};
use std::sync::Arc;

/// Products in a lower precision apply on the CPU to f32 tensors only.
pub fn lowp_usable(t: &Tensor) -> bool {
    t.device().is_cpu() && t.dtype() == DType::F32
}

/// x W^T + b as one graph node on CPU f32 with BLAS: the output starts as the bias in every row
/// and one sgemm adds x W^T to it (beta = 1). Composed (matmul, bias rows, add) a Linear was three
/// nodes, each with its own output and, in training, its own gradient buffer to fill and add.
/// In a lower precision the products (forward and both gradients) run in it; the bias and its
/// gradient stay f32.
pub struct FusedLinear {
    precision: Precision,
    packed: Option<Arc<PackedWeight>>,
}

pub fn fusable(x: &Tensor, w: &Tensor, b: &Tensor) -> bool {
    blas().is_some()
        && [x, w, b]
            .iter()
            .all(|t| t.device().is_cpu() && t.dtype() == DType::F32)
        && x.elem_count() > 0
}

impl FusedLinear {
    pub fn new(precision: Precision, packed: Option<Arc<PackedWeight>>) -> FusedLinear {
        FusedLinear { precision, packed }
    }
}

impl CustomOp3 for FusedLinear {
    fn name(&self) -> &'static str {
        "linear"
    }

    fn cpu_fwd(
        &self,
        sx: &CpuStorage,
        lx: &Layout,
        sw: &CpuStorage,
        lw: &Layout,
        sb: &CpuStorage,
        lb: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (x, w, b) = (
            contiguous_f32(sx, lx, "linear")?,
            contiguous_f32(sw, lw, "linear")?,
            contiguous_f32(sb, lb, "linear")?,
        );
        let (out, inp) = lw.shape().dims2()?;
        let rows = x.len() / inp.max(1);
        let mut dims = lx.dims().to_vec();
        *dims.last_mut().expect("rank >= 1") = out;
        let mut y = Vec::with_capacity(rows * out);
        for _ in 0..rows {
            y.extend_from_slice(b);
        }
        if self.precision == Precision::F32 {
            let blas = blas().expect("checked by fusable()");
            blas.sgemm_beta(NO_TRANS, TRANS, rows, out, inp, x, inp, w, inp, 1.0, &mut y)?;
        } else if rows > 0 {
            precision::gemm(
                self.precision,
                MatRef::rows(x, inp),
                MatRef::transposed(w, inp),
                self.packed.as_deref(),
                (rows, inp, out),
                &mut y,
                out,
                true,
            )?;
        }
        Ok((CpuStorage::F32(y), Shape::from(dims)))
    }

    fn bwd(
        &self,
        x: &Tensor,
        w: &Tensor,
        _b: &Tensor,
        _res: &Tensor,
        dy: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let (out, inp) = w.dims2()?;
        let rows = dy.elem_count() / out.max(1);
        let (dy2, x2) = (dy.reshape((rows, out))?, x.reshape((rows, inp))?);
        // the bias gradient (column sums) as one sgemm: candle's dim-0 sum is a strided loop
        let ones = Tensor::ones((1, rows), DType::F32, dy.device())?;
        let p = self.precision;
        Ok((
            Some(precision::matmul(p, &dy2, w)?.reshape(x.shape())?),
            Some(precision::matmul(p, &dy2.t()?, &x2)?),
            Some(matmul(&ones, &dy2)?.reshape(out)?),
        ))
    }
}
