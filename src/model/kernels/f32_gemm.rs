//! condenser's own f32 GEMM for frozen weights (inference) on AVX2 + FMA CPUs: C = bias + A B
//! with B = W^T packed once per model, A (activations) read in place, the bias as C's starting
//! value.
//!
//! Why not the BLAS: on a 2-core AMD EPYC Zen 3 (benches/README.md, issue 35) OpenBLAS's sgemm ran
//! BERT's four products at ~89% of the FMA units' peak; the same 6 x 16 register tile with B
//! packed in advance, A's rows read where they lie (a 6-row strip streams from L2 without a packing
//! pass) and one k-block up to 1,536 (C is then written once, never reloaded from L3) ran at
//! 92-97% (alone; ~92% inside an encode, where OpenBLAS's were ~90%), and the bias copy a BLAS
//! needs (beta = 1 over a C filled with the bias) goes. Not used on
//! AVX-512 CPUs: OpenBLAS's and oneMKL's AVX-512 kernels there have not been measured against it.
//!
//! Each output element is one k-ordered sum (in blocks of at most `KC_MAX`), single-threaded: the
//! engine runs its batches on threads of its own, so the bits never depend on the thread count.

/// Output columns a tile covers (two 8-lane vectors).
pub const NR: usize = 16;
/// Rows a tile covers: 12 accumulators + 2 B vectors + 1 broadcast of the 16 ymm registers.
pub const MR: usize = 6;
/// The largest k-block: one block for BERT's products up to an intermediate of 1,536 (MiniLM's);
/// B's 16-column panel of it (96 KiB) stays in L2 beside the A strips it meets.
const KC_MAX: usize = 1536;
/// Rows of A a block runs against all of B's panels before the next block: 96 rows of 1,536
/// (576 KiB) at most; the measured optimum was flat from 24 to 96.
const MC: usize = 96;

/// Whether frozen f32 weights are packed for this kernel (CONDENSER_F32_GEMM): `auto` (the
/// default) on the AVX2 + FMA class only, where it was measured faster than the BLAS; `own` on any
/// CPU with AVX2 + FMA; `blas` never. An unknown value is refused loudly, as CONDENSER_ISA is (a
/// typo must not silently measure the other path).
pub fn chosen() -> bool {
    static CHOSEN: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *CHOSEN.get_or_init(|| {
        let v = std::env::var("CONDENSER_F32_GEMM").unwrap_or_default();
        match v.to_ascii_lowercase().as_str() {
            "" | "auto" => super::isa::active() == super::isa::Isa::Avx2 && supported(),
            "own" => supported(),
            "blas" => false,
            _ => panic!("CONDENSER_F32_GEMM={v}: expected auto, own or blas"),
        }
    })
}

/// Whether this CPU runs the kernel (AVX2 and FMA).
pub fn supported() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// A Linear's weight W (n x k, row-major) as B = W^T in the kernel's layout: for each k-block,
/// for each panel of `NR` output columns, `[k in block][NR]` (columns past n are zeros).
pub struct PackedF32 {
    data: Vec<f32>,
    pub n: usize,
    pub k: usize,
    kc: usize,
}

impl std::fmt::Debug for PackedF32 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PackedF32({} x {})", self.k, self.n)
    }
}

impl PackedF32 {
    pub fn weight(w: &[f32], n: usize, k: usize) -> PackedF32 {
        assert_eq!(w.len(), n * k, "a weight of n x k values");
        let kc = k.div_ceil(k.div_ceil(KC_MAX).max(1)).max(1);
        let panels = n.div_ceil(NR);
        let mut data = vec![0f32; panels * NR * k];
        let mut off = 0;
        for p0 in (0..k).step_by(kc) {
            let kb = kc.min(k - p0);
            for jp in 0..panels {
                for j in jp * NR..((jp + 1) * NR).min(n) {
                    let col = j - jp * NR;
                    for (kk, &v) in w[j * k + p0..][..kb].iter().enumerate() {
                        data[off + kk * NR + col] = v;
                    }
                }
                off += kb * NR;
            }
        }
        PackedF32 { data, n, k, kc }
    }
}

/// C (m x n, row stride ldc) = bias + A B; A is m x k with row stride lda. Written without reading
/// C: `c` may be uninitialised, and every element of its m x n region is written (a Linear's
/// output needs no fill first). Panics where the slices are too short for the shapes or the CPU
/// lacks AVX2 + FMA (callers check `supported`).
pub fn gemm_bias(
    a: &[f32],
    lda: usize,
    m: usize,
    b: &PackedF32,
    bias: &[f32],
    c: &mut [std::mem::MaybeUninit<f32>],
    ldc: usize,
) {
    check(a, lda, m, b, c.len(), ldc);
    assert_eq!(bias.len(), b.n, "a bias of n values");
    // SAFETY: shapes, slices and CPU checked above; with a bias C is only written
    unsafe { run(a, lda, m, b, bias, c.as_mut_ptr().cast(), ldc) }
}

fn check(a: &[f32], lda: usize, m: usize, b: &PackedF32, c_len: usize, ldc: usize) {
    let (n, k) = (b.n, b.k);
    assert!(supported(), "the f32 kernel needs AVX2 and FMA");
    if m > 0 && n > 0 {
        assert!(lda >= k && a.len() >= (m - 1) * lda + k, "A too short");
        assert!(ldc >= n && c_len >= (m - 1) * ldc + n, "C too short");
    }
}

/// Safety: `check` passed for these operands, and `c` points at C's m x n region (row stride ldc).
unsafe fn run(
    a: &[f32],
    lda: usize,
    m: usize,
    b: &PackedF32,
    bias: &[f32],
    c: *mut f32,
    ldc: usize,
) {
    if m == 0 || b.n == 0 {
        return;
    }
    if b.k == 0 {
        for r in 0..m {
            std::ptr::copy_nonoverlapping(bias.as_ptr(), c.add(r * ldc), b.n);
        }
        return;
    }
    #[cfg(target_arch = "x86_64")]
    blocks(a, lda, m, b, bias, c, ldc);
}

/// The tile loops: row blocks of MC, k-blocks, column panels, 6-row strips. The first k-block
/// starts from the bias (C is not read); later blocks add to C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn blocks(
    a: &[f32],
    lda: usize,
    m: usize,
    b: &PackedF32,
    bias: &[f32],
    c: *mut f32,
    ldc: usize,
) {
    let (n, k, kc) = (b.n, b.k, b.kc);
    let panels = n.div_ceil(NR);
    // a zero-padded last panel of the bias, so the tile always reads NR values
    let mut bias_pad = [0f32; NR];
    for i0 in (0..m).step_by(MC) {
        let mb = MC.min(m - i0);
        let mut boff = 0;
        for p0 in (0..k).step_by(kc) {
            let kb = kc.min(k - p0);
            let start = (p0 == 0).then_some(bias);
            for jp in 0..panels {
                let bp = b.data[boff + jp * kb * NR..][..kb * NR].as_ptr();
                let (j0, cols) = (jp * NR, NR.min(n - jp * NR));
                let bias_p = start.map(|v| {
                    bias_pad[..cols].copy_from_slice(&v[j0..j0 + cols]);
                    bias_pad.as_ptr()
                });
                for r0 in (i0..i0 + mb).step_by(MR) {
                    let rows = MR.min(i0 + mb - r0);
                    let ap = a[r0 * lda + p0..].as_ptr();
                    let cp = c.add(r0 * ldc + j0);
                    if rows == MR && cols == NR {
                        tile(kb, ap, lda, bp, cp, ldc, bias_p);
                    } else {
                        edge(kb, ap, lda, (rows, cols), bp, cp, ldc, bias_p);
                    }
                }
            }
            boff += panels * kb * NR;
        }
    }
}

/// A tile with fewer than MR rows or NR columns: A's rows copied into a zero-padded strip and C
/// (when there is no bias) into a full tile, the tile run on those, the valid part copied back.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn edge(
    kb: usize,
    ap: *const f32,
    lda: usize,
    (rows, cols): (usize, usize),
    bp: *const f32,
    c: *mut f32,
    ldc: usize,
    bias: Option<*const f32>,
) {
    let mut strip = vec![0f32; MR * kb];
    for r in 0..rows {
        std::ptr::copy_nonoverlapping(ap.add(r * lda), strip[r * kb..].as_mut_ptr(), kb);
    }
    let mut t = [0f32; MR * NR];
    if bias.is_none() {
        for r in 0..rows {
            std::ptr::copy_nonoverlapping(c.add(r * ldc), t[r * NR..].as_mut_ptr(), cols);
        }
    }
    tile(kb, strip.as_ptr(), kb, bp, t.as_mut_ptr(), NR, bias);
    for r in 0..rows {
        std::ptr::copy_nonoverlapping(t[r * NR..].as_ptr(), c.add(r * ldc), cols);
    }
}

/// The 6 x 16 register tile: C[0..6][0..16] = bias (or C) + sum over kb of A[r][k] B[k][0..16].
/// A's six rows are broadcast one value at a time from where they lie (stride lda); B's panel
/// is read 16 values a step.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn tile(
    kb: usize,
    a: *const f32,
    lda: usize,
    b: *const f32,
    c: *mut f32,
    ldc: usize,
    bias: Option<*const f32>,
) {
    use std::arch::x86_64::*;
    let row = |r: usize| c.add(r * ldc);
    let load = |p: *const f32| (_mm256_loadu_ps(p), _mm256_loadu_ps(p.add(8)));
    let init = |r: usize| match bias {
        Some(v) => load(v),
        None => load(row(r)),
    };
    let (mut c00, mut c01) = init(0);
    let (mut c10, mut c11) = init(1);
    let (mut c20, mut c21) = init(2);
    let (mut c30, mut c31) = init(3);
    let (mut c40, mut c41) = init(4);
    let (mut c50, mut c51) = init(5);
    let (a0, a1, a2, a3, a4, a5) = (
        a,
        a.add(lda),
        a.add(2 * lda),
        a.add(3 * lda),
        a.add(4 * lda),
        a.add(5 * lda),
    );
    let mut bk = b;
    for kk in 0..kb {
        let b0 = _mm256_loadu_ps(bk);
        let b1 = _mm256_loadu_ps(bk.add(8));
        let x = _mm256_broadcast_ss(&*a0.add(kk));
        c00 = _mm256_fmadd_ps(x, b0, c00);
        c01 = _mm256_fmadd_ps(x, b1, c01);
        let x = _mm256_broadcast_ss(&*a1.add(kk));
        c10 = _mm256_fmadd_ps(x, b0, c10);
        c11 = _mm256_fmadd_ps(x, b1, c11);
        let x = _mm256_broadcast_ss(&*a2.add(kk));
        c20 = _mm256_fmadd_ps(x, b0, c20);
        c21 = _mm256_fmadd_ps(x, b1, c21);
        let x = _mm256_broadcast_ss(&*a3.add(kk));
        c30 = _mm256_fmadd_ps(x, b0, c30);
        c31 = _mm256_fmadd_ps(x, b1, c31);
        let x = _mm256_broadcast_ss(&*a4.add(kk));
        c40 = _mm256_fmadd_ps(x, b0, c40);
        c41 = _mm256_fmadd_ps(x, b1, c41);
        let x = _mm256_broadcast_ss(&*a5.add(kk));
        c50 = _mm256_fmadd_ps(x, b0, c50);
        c51 = _mm256_fmadd_ps(x, b1, c51);
        bk = bk.add(NR);
    }
    let store = |r: usize, lo: __m256, hi: __m256| {
        _mm256_storeu_ps(row(r), lo);
        _mm256_storeu_ps(row(r).add(8), hi);
    };
    store(0, c00, c01);
    store(1, c10, c11);
    store(2, c20, c21);
    store(3, c30, c31);
    store(4, c40, c41);
    store(5, c50, c51);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::kernels::test_data;

    /// Against a plain f64 product, over shapes with edge rows and columns, several k-blocks
    /// (k past KC_MAX: the later blocks add to C) and a C row stride wider than n.
    #[test]
    fn packed_f32_gemm_matches_a_plain_product() {
        if !supported() {
            eprintln!("skipped: this CPU has no AVX2 + FMA");
            return;
        }
        for &(m, n, k) in &[
            (1, 1, 1),
            (6, 16, 8),
            (7, 17, 33),
            (13, 40, 384),
            (100, 48, 5),
            (97, 35, 1537),
            (5, 384, 3100),
        ] {
            let (lda, ldc) = (k + 3, n + 5);
            let a = test_data(m * lda, 1);
            let w = test_data(n * k, 2);
            let bias = test_data(n, 3);
            let packed = PackedF32::weight(&w, n, k);
            let c0 = test_data(m * ldc, 4);
            let mut c = c0.clone();
            // SAFETY: f32 and MaybeUninit<f32> share a layout; c stays initialised
            let uninit = unsafe { std::slice::from_raw_parts_mut(c.as_mut_ptr().cast(), c.len()) };
            gemm_bias(&a, lda, m, &packed, &bias, uninit, ldc);
            for i in 0..m {
                for j in 0..ldc {
                    let got = c[i * ldc + j];
                    if j >= n {
                        assert_eq!(got, c0[i * ldc + j], "a column past n was written");
                        continue;
                    }
                    let start = bias[j] as f64;
                    let terms = (0..k).map(|p| a[i * lda + p] as f64 * w[j * k + p] as f64);
                    let want = start + terms.clone().sum::<f64>();
                    // f32 rounding of a k-term sum: ~sqrt(k) eps of the terms' magnitudes
                    let size = start.abs() + terms.map(f64::abs).sum::<f64>();
                    let tol = 1e-6 * (k as f64).sqrt() * size.max(1.0);
                    assert!(
                        (got as f64 - want).abs() <= tol,
                        "{m}x{n}x{k}: C[{i}][{j}] {got} against {want}"
                    );
                }
            }
        }
    }
}
