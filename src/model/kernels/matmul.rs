//! Matrix multiplication through BLAS sgemm on CPU f32 (batched over leading dims), with a
//! backward so training uses it too; candle's matmul everywhere else.
use super::blas::{blas, NO_TRANS, TRANS};
use candle_core::{bail, CpuStorage, CustomOp2, DType, Layout, Result, Shape, Tensor};

struct BlasMatMul;

/// How sgemm reads a (.., rows, cols) operand: its trans flag and leading dimension. Leading
/// (batch) dims must be packed at rows * cols.
fn gemm_layout(l: &Layout) -> Option<(i32, usize)> {
    let (d, s) = (l.dims(), l.stride());
    let r = d.len();
    let (rows, cols) = (d[r - 2], d[r - 1]);
    let (trans, ld) = if s[r - 1] == 1 && s[r - 2] == cols {
        (NO_TRANS, cols)
    } else if s[r - 2] == 1 && s[r - 1] == rows {
        (TRANS, rows)
    } else {
        return None;
    };
    let mut expect = rows * cols;
    for i in (0..r - 2).rev() {
        if d[i] > 1 && s[i] != expect {
            return None;
        }
        expect *= d[i];
    }
    Some((trans, ld))
}

impl CustomOp2 for BlasMatMul {
    fn name(&self) -> &'static str {
        "blas-matmul"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (Some((ta, lda)), Some((tb, ldb))) = (gemm_layout(l1), gemm_layout(l2)) else {
            bail!("blas-matmul: unsupported layout")
        };
        let (d1, d2) = (l1.dims(), l2.dims());
        let r = d1.len();
        let (m, k, n) = (d1[r - 2], d1[r - 1], d2[r - 1]);
        let batch: usize = d1[..r - 2].iter().product();
        let a = &s1.as_slice::<f32>()?[l1.start_offset()..];
        let b = &s2.as_slice::<f32>()?[l2.start_offset()..];
        let blas = blas().expect("checked by matmul()");
        let mut out = vec![0f32; batch * m * n];
        for i in 0..batch {
            blas.sgemm(
                ta,
                tb,
                m,
                n,
                k,
                &a[i * m * k..],
                lda,
                &b[i * k * n..],
                ldb,
                &mut out[i * m * n..(i + 1) * m * n],
            )?;
        }
        let mut dims = d1.to_vec();
        dims[r - 1] = n;
        Ok((CpuStorage::F32(out), Shape::from(dims)))
    }

    fn bwd(
        &self,
        a: &Tensor,
        b: &Tensor,
        _res: &Tensor,
        g: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        Ok((Some(matmul(g, &b.t()?)?), Some(matmul(&a.t()?, g)?)))
    }
}

/// A view sgemm can read, copying only when the layout is neither plain nor a transpose.
fn gemm_ready(t: &Tensor) -> Result<Tensor> {
    if gemm_layout(t.layout()).is_some() {
        Ok(t.clone())
    } else {
        t.contiguous()
    }
}

/// `a.matmul(b)` (same batch dims), through BLAS where it applies.
pub fn matmul(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let usable = blas().is_some()
        && a.device().is_cpu()
        && a.dtype() == DType::F32
        && b.dtype() == DType::F32
        && a.rank() >= 2
        && a.rank() == b.rank()
        && a.dims()[..a.rank() - 2] == b.dims()[..b.rank() - 2]
        && a.dims()[a.rank() - 1] == b.dims()[b.rank() - 2]
        && a.elem_count() > 0
        && b.elem_count() > 0;
    if !usable {
        return a.matmul(b);
    }
    gemm_ready(a)?.apply_op2(&gemm_ready(b)?, BlasMatMul)
}

/// `v` (n) repeated over `rows` rows, as (rows, n). For a trainable `v` this is ones(rows, 1) @ v:
/// the same values (each is `1.0 * v[j]`), but v's gradient becomes one sgemm instead of candle's
/// strided column reduction, 11% of a training step. Inference keeps the plain broadcast.
pub fn rows_of(v: &Tensor, rows: usize) -> Result<Tensor> {
    let n = v.elem_count();
    if v.is_variable() || v.track_op() {
        let ones = Tensor::ones((rows, 1), v.dtype(), v.device())?;
        matmul(&ones, &v.reshape((1, n))?)
    } else {
        v.reshape((1, n))?.broadcast_as((rows, n))
    }
}
