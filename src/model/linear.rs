use super::bf16::{MatRef, PackedB};
use super::blas::{blas, NO_TRANS, TRANS};
use super::matmul::{matmul, rows_of};
use super::precision::{self, Precision};
use candle_core::{bail, CpuStorage, CustomOp3, DType, Layout, Module, Result, Shape, Tensor};
use candle_nn::VarBuilder;
use std::sync::Arc;

/// y = x W^T + b, with HF's weight layout (out, in), through `matmul` (BLAS on CPU), or in a
/// lower precision (model/precision.rs) after `set_precision`.
#[derive(Clone, Debug)]
pub struct Linear {
    pub weight: Tensor,
    pub bias: Option<Tensor>,
    precision: Precision,
    /// The weight packed for the bf16 kernel, once, when it is frozen (inference); a trained
    /// weight changes every step and is packed inside each product instead.
    packed: Option<Arc<PackedB>>,
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

    /// Run this layer's products in `p` from now on (callers check the CPU first:
    /// `Precision::check_cpu`). A lower precision applies on the CPU to f32 weights only.
    pub fn set_precision(&mut self, p: Precision) -> Result<()> {
        self.precision = p;
        self.packed = None;
        if p == Precision::Bf16 && !self.weight.is_variable() && lowp_usable(&self.weight) {
            let (out, inp) = self.weight.dims2()?;
            let w = self.weight.flatten_all()?.to_vec1::<f32>()?;
            self.packed = Some(Arc::new(PackedB::weight(&w, out, inp)));
        }
        Ok(())
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

fn lowp_usable(t: &Tensor) -> bool {
    t.device().is_cpu() && t.dtype() == DType::F32
}

impl Module for Linear {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let dims = x.dims().to_vec();
        let inp = *dims.last().unwrap();
        let rows = x.elem_count() / inp.max(1);
        let mut out_dims = dims.clone();
        *out_dims.last_mut().unwrap() = self.weight.dim(0)?;
        let op = FusedLinear {
            precision: self.precision,
            packed: self.packed.clone(),
        };
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

/// x W^T + b as one graph node on CPU f32 with BLAS: the output starts as the bias in every row
/// and one sgemm adds x W^T to it (beta = 1). Composed (matmul, bias rows, add) a Linear was three
/// nodes, each with its own output and, in training, its own gradient buffer to fill and add.
/// In a lower precision the products (forward and both gradients) run in it; the bias and its
/// gradient stay f32.
struct FusedLinear {
    precision: Precision,
    packed: Option<Arc<PackedB>>,
}

fn fusable(x: &Tensor, w: &Tensor, b: &Tensor) -> bool {
    blas().is_some()
        && [x, w, b]
            .iter()
            .all(|t| t.device().is_cpu() && t.dtype() == DType::F32)
        && x.elem_count() > 0
}

fn contiguous<'a>(s: &'a CpuStorage, l: &Layout) -> Result<&'a [f32]> {
    match l.contiguous_offsets() {
        Some((a, b)) => Ok(&s.as_slice::<f32>()?[a..b]),
        None => bail!("linear: a contiguous input is required"),
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
            contiguous(sx, lx)?,
            contiguous(sw, lw)?,
            contiguous(sb, lb)?,
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
            blas.sgemm_beta(NO_TRANS, TRANS, rows, out, inp, x, inp, w, inp, 1.0, &mut y);
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
            );
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
