use super::blas::{blas, NO_TRANS, TRANS};
use super::matmul::{matmul, rows_of};
use candle_core::{bail, CpuStorage, CustomOp3, DType, Layout, Module, Result, Shape, Tensor};
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
        let mut out_dims = dims.clone();
        *out_dims.last_mut().unwrap() = self.weight.dim(0)?;
        if let Some(b) = self.bias.as_ref().filter(|b| fusable(x, &self.weight, b)) {
            // any leading dims: the op reads x as (rows, in), so no reshape nodes join the graph
            return x.contiguous()?.apply_op3(
                &self.weight.contiguous()?,
                &b.contiguous()?,
                FusedLinear,
            );
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
struct FusedLinear;

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
        let blas = blas().expect("checked by fusable()");
        blas.sgemm_beta(NO_TRANS, TRANS, rows, out, inp, x, inp, w, inp, 1.0, &mut y);
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
        Ok((
            Some(matmul(&dy2, w)?.reshape(x.shape())?),
            Some(matmul(&dy2.t()?, &x2)?),
            Some(matmul(&ones, &dy2)?.reshape(out)?),
        ))
    }
}
