//! The precision of a model's Linear layers on the CPU: f32, or bf16 / f16 operands with f32
//! accumulation and f32 outputs. Only the Linears' products (~90% of BERT's FLOPs at sentence
//! lengths) change; attention scores, softmax, LayerNorm, GELU, losses and the optimizer stay f32,
//! as under PyTorch's CPU autocast (which also keeps those in f32), so the weights a Linear keeps
//! are f32 masters and only its products are rounded.
//!
//! bf16 runs on the AVX512-BF16 kernel (`super::bf16`), ~2x sgemm's speed. f16 has no product
//! instruction on these CPUs: its operands are rounded to f16 (overflow to inf, underflow to
//! subnormals and zero, as on a GPU) and multiplied by sgemm, whose f32 products of f16 values are
//! exact, so the numbers are an f16 GEMM's with f32 accumulation, at f32 speed.
use super::bf16::{self, MatRef, PackedB};
use super::blas::{blas, NO_TRANS};
use super::f32_gemm::PackedF32;
use crate::settings::Bf16Setting;
use candle_core::{bail, CpuStorage, CustomOp2, Layout, Result, Shape, Tensor};

#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    #[default]
    F32,
    Bf16,
    F16,
}

impl Precision {
    pub fn name(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::Bf16 => "bf16",
            Precision::F16 => "f16",
        }
    }

    /// Refuse a precision this CPU cannot run at its speed, naming the CPU and the way out.
    pub fn check_cpu(self, flag: &str) -> crate::error::Result<()> {
        let choice = crate::settings::get().bf16;
        if self == Precision::Bf16 && choice == Bf16Setting::Mkl && bf16_route() != Bf16Route::Mkl {
            return Err(crate::error::Error::msg(format!(
                "{flag} bf16 with CONDENSER_BF16=mkl: the loaded BLAS ({}) has no bf16 GEMM; load \
                 oneMKL (CONDENSER_BLAS=mkl, fetched by datasets/fetch.sh) or unset CONDENSER_BF16",
                super::blas::describe()
            )));
        }
        if self == Precision::Bf16 && bf16_route() == Bf16Route::Own && !bf16::supported() {
            return Err(crate::error::Error::msg(format!(
                "{flag} bf16: this CPU ({}) has no AVX512-BF16 (nor AMX-BF16), so bf16 products \
                 would only be emulated, slower than f32; use {flag} f32",
                crate::runtime::cpu_model()
            )));
        }
        if self == Precision::F16 && blas().is_none() {
            return Err(crate::error::Error::msg(format!(
                "{flag} f16 runs its products through BLAS sgemm and none was found \
                 (bash datasets/fetch.sh installs OpenBLAS)"
            )));
        }
        Ok(())
    }
}

/// Where bf16 products run (CONDENSER_BF16): condenser's kernel (AMX tiles where the CPU has
/// them and Linux grants them, else AVX512-BF16; `avx512bf16` keeps the latter) or oneMKL's bf16
/// GEMM (AMX on Sapphire Rapids and later). `auto` (the default) takes condenser's kernel, and
/// oneMKL's GEMM only where the CPU has AMX that condenser's kernel may not use but oneMKL is
/// loaded: on the AMX Xeon measured the two ran the encode at speeds within that machine's
/// run-to-run spread, condenser's in ~40 MB less memory (benches/README.md). `mkl` or `own`
/// insists (the other is refused where it cannot run: `check_cpu`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bf16Route {
    Own,
    Mkl,
}

pub fn bf16_route() -> Bf16Route {
    static ROUTE: std::sync::OnceLock<Bf16Route> = std::sync::OnceLock::new();
    *ROUTE.get_or_init(|| {
        let mkl = blas().is_some_and(|b| b.has_bf16());
        match crate::settings::get().bf16 {
            Bf16Setting::Mkl if mkl => Bf16Route::Mkl,
            Bf16Setting::Auto if mkl && super::isa::has_amx_bf16() && !bf16::amx_enabled() => {
                Bf16Route::Mkl
            }
            _ => Bf16Route::Own,
        }
    })
}

/// Whether bf16 products run on AMX tiles (either route).
pub fn bf16_on_amx() -> bool {
    match bf16_route() {
        Bf16Route::Mkl => super::isa::has_amx_bf16(),
        Bf16Route::Own => bf16::amx_enabled(),
    }
}

/// Where bf16 products run, for summaries.
pub fn bf16_backend() -> &'static str {
    match bf16_route() {
        Bf16Route::Mkl if bf16_on_amx() => "oneMKL's bf16 GEMM (AMX)",
        Bf16Route::Mkl => "oneMKL's bf16 GEMM",
        Bf16Route::Own if bf16_on_amx() => "condenser's AMX kernel",
        Bf16Route::Own => "condenser's AVX512-BF16 kernel",
    }
}

/// A frozen weight (inference) made ready once for its products on this CPU's route, instead
/// of once a product: packed for condenser's bf16 kernel, rounded to bf16 bits for oneMKL's GEMM,
/// or (f32) packed for condenser's AVX2 kernel (`super::f32_gemm`).
pub enum PackedWeight {
    Own(PackedB),
    /// B = W^T (k x n, row-major) as bf16 bits.
    Mkl(Vec<u16>),
    F32(PackedF32),
}

impl std::fmt::Debug for PackedWeight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PackedWeight::Own(p) => write!(f, "{p:?}"),
            PackedWeight::Mkl(b) => write!(f, "Mkl({} bf16)", b.len()),
            PackedWeight::F32(p) => write!(f, "{p:?}"),
        }
    }
}

impl PackedWeight {
    /// A frozen weight W (n x k, row-major) made ready for `p`'s products on this CPU, or None
    /// where `p` takes no ready weight (f16; f32 on the BLAS).
    pub fn ready(p: Precision, w: &[f32], n: usize, k: usize) -> Option<PackedWeight> {
        PackedWeight::takes_ready(p).then(|| match p {
            Precision::F32 => PackedWeight::F32(PackedF32::weight(w, n, k)),
            _ => PackedWeight::weight(w, n, k),
        })
    }

    /// Whether `ready` makes a weight ready for `p` on this CPU (callers skip copying the weight
    /// out where it does not).
    pub fn takes_ready(p: Precision) -> bool {
        p == Precision::Bf16 || (p == Precision::F32 && super::f32_gemm::chosen())
    }

    /// A Linear's weight W (n x k, row-major) as B = W^T, for the route bf16 products take.
    pub fn weight(w: &[f32], n: usize, k: usize) -> PackedWeight {
        match bf16_route() {
            Bf16Route::Own => PackedWeight::Own(PackedB::weight(w, n, k)),
            Bf16Route::Mkl => PackedWeight::Mkl(
                (0..k * n)
                    .map(|i| bf16::to_bf16(w[(i % n) * k + i / n]))
                    .collect(),
            ),
        }
    }
}

/// `v` rounded to f16 and back (exact in f32).
fn f16_round(v: f32) -> f32 {
    half::f16::from_f32(v).to_f32()
}

/// A contiguous row-major copy of `a` (rows x cols), each element passed through `round`.
fn copy(a: &MatRef, rows: usize, cols: usize, round: fn(f32) -> f32) -> Vec<f32> {
    let mut out = Vec::with_capacity(rows * cols);
    for i in 0..rows {
        out.extend((0..cols).map(|j| round(a.data[i * a.rs + j * a.cs])));
    }
    out
}

/// C (m x n, ldc) = A (m x k) B (k x n) in `p`, or C += A B with `accumulate`. `packed` is B
/// already made ready for bf16 (a frozen weight), used instead of converting `b` again.
#[allow(clippy::too_many_arguments)]
pub fn gemm(
    p: Precision,
    a: MatRef,
    b: MatRef,
    packed: Option<&PackedWeight>,
    (m, k, n): (usize, usize, usize),
    c: &mut [f32],
    ldc: usize,
    accumulate: bool,
) -> Result<()> {
    let beta = if accumulate { 1.0 } else { 0.0 };
    match p {
        Precision::Bf16 if bf16_route() == Bf16Route::Mkl => {
            let bits = |x: &MatRef, rows: usize, cols: usize| x.to_bf16_rows(rows, cols);
            let blas = blas().expect("checked by bf16_route");
            let own;
            let b_bits = match packed {
                Some(PackedWeight::Mkl(w)) => w.as_slice(),
                _ => {
                    own = bits(&b, k, n);
                    &own
                }
            };
            blas.gemm_bf16(m, n, k, &bits(&a, m, k), b_bits, beta, c, ldc)
        }
        Precision::Bf16 => {
            match packed {
                Some(PackedWeight::Own(pb)) => bf16::gemm(a, m, pb, c, ldc, accumulate),
                _ => bf16::gemm(a, m, &PackedB::pack(b, k, n), c, ldc, accumulate),
            }
            Ok(())
        }
        // f16: the operands rounded (no f16 product instruction here), then sgemm; f32 as is
        Precision::F16 | Precision::F32 => {
            let round: fn(f32) -> f32 = if p == Precision::F16 {
                f16_round
            } else {
                |v| v
            };
            let (a2, b2) = (copy(&a, m, k, round), copy(&b, k, n, round));
            let blas = blas().expect("checked by Precision::check_cpu");
            blas.gemm(NO_TRANS, NO_TRANS, m, n, k, &a2, k, &b2, n, beta, c, ldc)
        }
    }
}

/// A 2-D strided f32 tensor's storage as a MatRef.
pub fn mat<'a>(s: &'a CpuStorage, l: &Layout) -> Result<MatRef<'a>> {
    let st = l.stride();
    if st.len() != 2 {
        bail!("low-precision matmul: 2-D operands only")
    }
    Ok(MatRef {
        data: &s.as_slice::<f32>()?[l.start_offset()..],
        rs: st[0],
        cs: st[1],
    })
}

/// a (m x k) @ b (k x n) in a low precision, f32 out, any strides. Used for the gradients of a
/// low-precision Linear; it has no backward of its own (nothing differentiates a gradient).
pub struct LowpMatMul(pub Precision);

impl CustomOp2 for LowpMatMul {
    fn name(&self) -> &'static str {
        "lowp-matmul"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let ((m, k), (k2, n)) = (l1.shape().dims2()?, l2.shape().dims2()?);
        if k != k2 {
            bail!("lowp-matmul: inner dimensions {k} and {k2} differ")
        }
        let mut c = vec![0f32; m * n];
        if m * n > 0 {
            gemm(
                self.0,
                mat(s1, l1)?,
                mat(s2, l2)?,
                None,
                (m, k, n),
                &mut c,
                n,
                false,
            )?;
        }
        Ok((CpuStorage::F32(c), Shape::from((m, n))))
    }
}

/// `a @ b` (2-D) in precision `p`; plain `matmul` for f32.
pub fn matmul(p: Precision, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    match p {
        Precision::F32 => super::matmul::matmul(a, b),
        _ => a.apply_op2_no_bwd(b, &LowpMatMul(p)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_rounding_overflows_and_underflows_as_f16_does() {
        assert_eq!(f16_round(1.0), 1.0);
        assert_eq!(f16_round(70000.0), f32::INFINITY);
        assert_eq!(f16_round(1e-9), 0.0);
        // 2049 is not an f16 (11-bit significand): ties to even -> 2048
        assert_eq!(f16_round(2049.0), 2048.0);
    }
}
