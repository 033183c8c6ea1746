//! condenser's own f32 GEMM for frozen weights (inference) on AVX2 + FMA and AVX-512 CPUs: C = bias + A B
//! with B = W^T packed once per model, A (activations) read in place, the bias as C's starting
//! value.
//!
//! Why not the BLAS: on a 2-core AMD EPYC Zen 3 (benches/README.md, issue 35) OpenBLAS's sgemm ran
//! BERT's four products at ~89% of the FMA units' peak; the same 6 x 16 register tile with B
//! packed in advance, A's rows read where they lie (a 6-row strip streams from L2 without a packing
//! pass) and one k-block up to 1,536 (C is then written once, never reloaded from L3) ran at
//! 92-97% (alone; ~92% inside an encode, where OpenBLAS's were ~90%), and the bias copy a BLAS
//! needs (beta = 1 over a C filled with the bias) goes. On an AMD Zen 4 (AVX-512 on 256-bit halves)
//! it ran MiniLM's encode 3-6% faster than OpenBLAS's SkylakeX kernel (7-14% with the attention
//! kernel as well); on the AVX-512 class it runs a 12 x 32 tile (`tiles::tile_wide`, the same
//! bits). On a Zen 5 (full-width 512-bit units) the whole encode ran 4.6-8.2% faster than on
//! OpenBLAS's SkylakeX kernel; Intel AVX-512 CPUs keep the BLAS by default: on a Xeon with AMX
//! oneMKL's GEMM ran the layer's products 1.3-1.6x faster than this kernel
//! (`isa::own_f32_linears`).
//!
//! Each output element is one k-ordered sum (in blocks of at most `KC_MAX`), single-threaded: the
//! engine runs its batches on threads of its own, so the bits never depend on the thread count.

/// The largest k-block: one block for BERT's products up to an intermediate of 1,536 (MiniLM's);
/// B's 16-column panel of it (96 KiB) stays in L2 beside the A strips it meets.
const KC_MAX: usize = 1536;
/// Rows of A a block runs against all of B's panels before the next block: 96 rows of 1,536
/// (576 KiB) at most; the measured optimum was flat from 24 to 96. A multiple of MR and WR.
const MC: usize = 96;
const _: () = assert!(MC.is_multiple_of(MR) && MC.is_multiple_of(WR));

mod panels;
mod tiles;
pub use panels::{pack_rows, pack_transposed};
// the tile is also the attention kernel's (head_attention.rs): one tile and one packing serve
// every f32 product
#[cfg(target_arch = "x86_64")]
pub(crate) use tiles::tile;
#[cfg(target_arch = "x86_64")]
use tiles::tile_wide;
pub use tiles::{MR, NR, WR};

/// CONDENSER_F32_GEMM (crate::settings): `auto` (the default: each of condenser's f32 inference
/// kernels where it was measured faster than the BLAS, `isa::own_f32_linears` and
/// `isa::own_f32_attention`), `own` (both kernels on any CPU with AVX2 + FMA) or `blas`
/// (neither).
fn choose(auto: fn() -> bool) -> bool {
    use crate::settings::F32Gemm;
    match crate::settings::get().f32_gemm {
        F32Gemm::Auto => auto() && supported(),
        F32Gemm::Own => supported(),
        F32Gemm::Blas => false,
    }
}

/// Whether frozen f32 weights are packed for this kernel and the Linears run on it.
pub fn chosen() -> bool {
    choose(super::isa::own_f32_linears)
}

/// Whether the f32 attention kernel (`head_attention`, on this kernel's tile) runs heads
/// without dropout, over the BLAS route.
pub fn attention_chosen() -> bool {
    choose(super::isa::own_f32_attention)
}

/// What an f32 inference runs on condenser's kernels, for summaries and benchmarks: the
/// Linears, the Linears and the attention, or nothing (None: the BLAS does all).
pub fn runs_here() -> Option<&'static str> {
    match (chosen(), attention_chosen()) {
        (true, true) => Some("frozen Linears and attention"),
        (true, false) => Some("frozen Linears"),
        (false, true) => Some("attention"),
        (false, false) => None,
    }
}

/// The kernel as summaries and benchmarks name it, with the tile that runs on this CPU.
pub fn describe() -> &'static str {
    if wide_tile() {
        "condenser's f32 kernel (AVX-512 12 x 32 tile)"
    } else {
        "condenser's f32 kernel (AVX2 6 x 16 tile)"
    }
}

/// Whether this CPU runs the kernel (AVX2 and FMA, the class not capped below them).
pub fn supported() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        // CONDENSER_ISA=baseline caps every kernel of condenser's, this one too
        super::isa::active() >= super::isa::Isa::Avx2
            && std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
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
            pack_transposed(&w[p0..], k, n, kb, &mut data[off..off + panels * NR * kb]);
            off += panels * NR * kb;
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
    unsafe { run(wide_tile(), a, lda, m, b, bias, c.as_mut_ptr().cast(), ldc) }
}

/// Whether the AVX-512 tile runs (the AVX-512 class is active); CONDENSER_ISA=avx2 keeps the
/// AVX2 one, which gives the same bits.
fn wide_tile() -> bool {
    super::isa::active() == super::isa::Isa::Avx512
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
#[allow(clippy::too_many_arguments)]
unsafe fn run(
    wide: bool,
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
    if wide {
        blocks::<true>(a, lda, m, b, bias, c, ldc)
    } else {
        blocks::<false>(a, lda, m, b, bias, c, ldc)
    }
}

/// The tile loops: row blocks of MC, k-blocks, column panels, row strips. The first k-block
/// starts from the bias (C is not read); later blocks add to C. With `WIDE` (AVX-512) two whole
/// panels at a time run as WR-row strips of the wide tile; what is left (a last single or
/// partial panel, a last partial strip) runs on the AVX2 tile, which gives the same bits.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn blocks<const WIDE: bool>(
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
    // the panels with all NR columns: those the wide tile pairs
    let whole = n / NR;
    // a zero-padded last panel of the bias, so the tile always reads NR values
    let mut bias_pad = [0f32; NR];
    for i0 in (0..m).step_by(MC) {
        let mb = MC.min(m - i0);
        let mut boff = 0;
        for p0 in (0..k).step_by(kc) {
            let kb = kc.min(k - p0);
            let start = (p0 == 0).then_some(bias);
            let panel = |jp: usize| b.data[boff + jp * kb * NR..][..kb * NR].as_ptr();
            // rows r0..r1 of the block against panel jp on the AVX2 tile, 6-row strips
            let mut narrow = |jp: usize, r0: usize, r1: usize| {
                let (j0, cols) = (jp * NR, NR.min(n - jp * NR));
                let bias_p = start.map(|v| {
                    bias_pad[..cols].copy_from_slice(&v[j0..j0 + cols]);
                    bias_pad.as_ptr()
                });
                for r in (r0..r1).step_by(MR) {
                    let rows = MR.min(r1 - r);
                    let ap = a[r * lda + p0..].as_ptr();
                    let cp = c.add(r * ldc + j0);
                    if rows == MR && cols == NR {
                        tile(kb, ap, lda, panel(jp), cp, ldc, bias_p);
                    } else {
                        edge(kb, ap, lda, (rows, cols), panel(jp), cp, ldc, bias_p);
                    }
                }
            };
            let mut jp = 0;
            while WIDE && jp + 2 <= whole {
                let j0 = jp * NR;
                let bias_p = start.map(|v| v[j0..j0 + 2 * NR].as_ptr());
                let full = mb / WR * WR;
                for r in (i0..i0 + full).step_by(WR) {
                    let ap = a[r * lda + p0..].as_ptr();
                    let cp = c.add(r * ldc + j0);
                    tile_wide(kb, ap, lda, panel(jp), panel(jp + 1), cp, ldc, bias_p);
                }
                if full < mb {
                    narrow(jp, i0 + full, i0 + mb);
                    narrow(jp + 1, i0 + full, i0 + mb);
                }
                jp += 2;
            }
            for jp in jp..panels {
                narrow(jp, i0, i0 + mb);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::kernels::test_data;

    /// Against a plain f64 product, over shapes with edge rows and columns, several k-blocks
    /// (k past KC_MAX: the later blocks add to C) and a C row stride wider than n; on AVX-512
    /// CPUs the wide tile's results must be the AVX2 tile's bit for bit.
    #[test]
    fn packed_f32_gemm_matches_a_plain_product() {
        if !supported() {
            crate::runtime::skipped(
                "the f32 kernel's test",
                "avx2",
                "this CPU has no AVX2 + FMA",
            );
            return;
        }
        let wide =
            crate::model::kernels::isa::detected() == crate::model::kernels::isa::Isa::Avx512;
        if !wide {
            crate::runtime::skipped(
                "the f32 kernel's AVX-512 tile",
                "avx512",
                "this CPU has no AVX-512",
            );
        }
        for &(m, n, k) in &[
            (1, 1, 1),
            (6, 16, 8),
            (7, 17, 33),
            (13, 40, 384),
            (30, 64, 100),
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
            let product = |wide: bool| {
                let mut c = c0.clone();
                check(&a, lda, m, &packed, c.len(), ldc);
                // SAFETY: checked above; C is a live m x ldc buffer
                unsafe { run(wide, &a, lda, m, &packed, &bias, c.as_mut_ptr(), ldc) };
                c
            };
            let c = product(false);
            if wide {
                assert!(
                    product(true) == c,
                    "{m}x{n}x{k}: the AVX-512 tile changed a bit"
                );
            }
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
