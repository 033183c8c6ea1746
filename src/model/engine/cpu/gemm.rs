//! The three products of a Linear layer in training, on row-major buffers (weights in HF's
//! (out, in) layout): y += x W^T (forward, y holding the bias), dx (+)= dy W, dW += dy^T x. In f32
//! they are single BLAS calls with the transposes as flags (nothing copied) and the gradient
//! accumulated by the GEMM itself (beta 1); in bf16 or f16 they run through `precision::gemm`.
use crate::model::kernels::bf16::{self, MatRef};
use crate::model::kernels::blas::{Blas, NO_TRANS, TRANS};
use crate::model::kernels::f32_gemm;
use crate::model::kernels::precision::{self, PackedWeight, Precision};
use crate::model::kernels::vector::bias_rows;
use candle_core::Result;

#[derive(Clone, Copy)]
pub struct Gemm<'b> {
    pub blas: &'b Blas,
    pub precision: Precision,
}

impl Gemm<'_> {
    /// y (rows x out, row stride ldy) += x (rows x inp) W^T, W (out x inp); `packed`: W made
    /// ready once for bf16 (a frozen weight), used instead of converting it again.
    #[allow(clippy::too_many_arguments)]
    pub fn forward(
        &self,
        x: &[f32],
        w: &[f32],
        packed: Option<&PackedWeight>,
        (rows, out, inp): (usize, usize, usize),
        y: &mut [f32],
        ldy: usize,
    ) -> Result<()> {
        match self.precision {
            // the f32 kernel's packed weights are taken by `linear`, which starts y at the bias
            Precision::F32 => self
                .blas
                .gemm(NO_TRANS, TRANS, rows, out, inp, x, inp, w, inp, 1.0, y, ldy),
            p => precision::gemm(
                p,
                MatRef::rows(x, inp),
                MatRef::transposed(w, inp),
                packed,
                (rows, inp, out),
                y,
                ldy,
                true,
            ),
        }
    }

    /// A new y (rows x out) = x (rows x inp) W^T + b. On condenser's f32 and bf16 kernels y
    /// starts as the bias inside the product (never filled first); elsewhere it is filled with b
    /// and `forward` adds.
    pub fn linear(
        &self,
        x: &[f32],
        w: &[f32],
        b: &[f32],
        packed: Option<&PackedWeight>,
        (rows, out, inp): (usize, usize, usize),
    ) -> Result<Vec<f32>> {
        let mut y = Vec::with_capacity(rows * out);
        let start_at_bias = match (self.precision, packed) {
            (Precision::F32, Some(PackedWeight::F32(pw))) => {
                f32_gemm::gemm_bias(x, inp, rows, pw, b, y.spare_capacity_mut(), out);
                true
            }
            (Precision::Bf16, Some(PackedWeight::Own(pb))) => {
                let a = MatRef::rows(x, inp);
                bf16::gemm_bias(a, rows, pb, b, y.spare_capacity_mut(), out);
                true
            }
            _ => false,
        };
        if start_at_bias {
            // SAFETY: gemm_bias wrote all rows x out values
            unsafe { y.set_len(rows * out) };
            return Ok(y);
        }
        let mut y = bias_rows(b, rows);
        self.forward(x, w, packed, (rows, out, inp), &mut y, out)?;
        Ok(y)
    }

    /// dx (rows x inp) = dy (rows x out) W, or dx += dy W with `accumulate`.
    #[allow(clippy::too_many_arguments)]
    pub fn input_grad(
        &self,
        dy: &[f32],
        w: &[f32],
        rows: usize,
        out: usize,
        inp: usize,
        dx: &mut [f32],
        accumulate: bool,
    ) -> Result<()> {
        let beta = if accumulate { 1.0 } else { 0.0 };
        match self.precision {
            Precision::F32 => self.blas.gemm(
                NO_TRANS, NO_TRANS, rows, inp, out, dy, out, w, inp, beta, dx, inp,
            ),
            p => precision::gemm(
                p,
                MatRef::rows(dy, out),
                MatRef::rows(w, inp),
                None,
                (rows, out, inp),
                dx,
                inp,
                accumulate,
            ),
        }
    }

    /// dW (out x inp) += dy^T (out x rows) x (rows x inp).
    pub fn weight_grad(
        &self,
        dy: &[f32],
        x: &[f32],
        rows: usize,
        out: usize,
        inp: usize,
        dw: &mut [f32],
    ) -> Result<()> {
        match self.precision {
            Precision::F32 => self.blas.gemm(
                TRANS, NO_TRANS, out, inp, rows, dy, out, x, inp, 1.0, dw, inp,
            ),
            p => precision::gemm(
                p,
                MatRef::transposed(dy, out),
                MatRef::rows(x, inp),
                None,
                (out, rows, inp),
                dw,
                inp,
                true,
            ),
        }
    }
}
