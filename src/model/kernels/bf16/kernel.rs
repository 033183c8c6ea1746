//! The AVX512-BF16 micro-kernel. `vdpbf16ps` multiplies pairs of bf16 along the contraction and
//! adds both products to one f32 lane: for C = start + A B it wants A's (row, k-pair) broadcast
//! as one 32-bit word and B as 16 columns x 2 k per vector, which is how [`super::PackedB`] lays
//! B out. A is read where it lies, a row of k-pair words converted once per product
//! (`super::gemm`), as the f32 kernel reads its activations: packing it into the tile's order
//! per strip scattered one word a store and was 8% of a bf16 document encode (perf, Zen 4,
//! issue 35). MR x 32 outputs per call (24 accumulators, 2 B vectors, one broadcast: 27 of 32
//! zmm registers), so every loaded B vector feeds MR instructions.
#![allow(clippy::missing_safety_doc)]
use super::matrix::NR;
use std::arch::x86_64::*;

/// Where a tile's sums start.
#[derive(Clone, Copy)]
pub enum Start {
    /// From zero (C is only written).
    Zero,
    /// From C's values (a later k-block, or a product added to C).
    C,
    /// From a bias of the tile's columns (C is only written).
    Bias(*const f32),
}

/// The masks of a 32-column row's two 16-lane halves that keep its first `ncols` columns.
#[inline(always)]
pub fn column_masks(ncols: usize) -> [__mmask16; 2] {
    let mask = |lo: usize| {
        let n = ncols.saturating_sub(lo).min(16);
        ((1u32 << n) - 1) as __mmask16
    };
    [mask(0), mask(16)]
}

/// A micro-kernel's strip: C[rows x ncols] (row stride ldc) = start + A (rows of `lda` words)
/// x one packed B panel over `pairs` k-pairs; `tile_rows` (rows <= MR) and `amx::strip` (rows
/// <= 32) have this shape.
pub type Strip =
    unsafe fn(usize, usize, *const u32, usize, *const u16, *mut f32, usize, usize, Start);

/// C[R x ncols] (row stride ldc) = start + A (R rows of `lda` words, a word a k-pair) x one
/// packed B panel, over `pairs` k-pairs. Columns past `ncols` (<= 32) are neither read nor
/// written.
///
/// # Safety
/// AVX512F and AVX512-BF16; `a` holds R rows of `pairs` words `lda` apart, `b` pairs * 64
/// halves, `c` every element of the R x ncols block, and a bias `ncols` values.
#[target_feature(enable = "avx512f,avx512bf16")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn tile<const R: usize>(
    pairs: usize,
    a: *const u32,
    lda: usize,
    b: *const u16,
    c: *mut f32,
    ldc: usize,
    ncols: usize,
    start: Start,
) {
    let [m0, m1] = column_masks(ncols);
    let load = |p: *const f32| {
        [
            _mm512_maskz_loadu_ps(m0, p),
            _mm512_maskz_loadu_ps(m1, p.add(16)),
        ]
    };
    let mut acc = [[_mm512_setzero_ps(); 2]; R];
    for (i, row) in acc.iter_mut().enumerate() {
        match start {
            Start::Zero => {}
            Start::C => *row = load(c.add(i * ldc)),
            Start::Bias(v) => *row = load(v),
        }
    }
    for p in 0..pairs {
        let b0: __m512bh = std::mem::transmute(_mm512_loadu_si512(b.add(p * 2 * NR).cast()));
        let b1: __m512bh = std::mem::transmute(_mm512_loadu_si512(b.add(p * 2 * NR + NR).cast()));
        for (i, row) in acc.iter_mut().enumerate() {
            let av: __m512bh = std::mem::transmute(_mm512_set1_epi32(*a.add(i * lda + p) as i32));
            row[0] = _mm512_dpbf16_ps(row[0], av, b0);
            row[1] = _mm512_dpbf16_ps(row[1], av, b1);
        }
    }
    for (i, row) in acc.iter().enumerate() {
        let cp = c.add(i * ldc);
        _mm512_mask_storeu_ps(cp, m0, row[0]);
        _mm512_mask_storeu_ps(cp.add(16), m1, row[1]);
    }
}

/// `tile` for a run-time row count 1..=MR.
///
/// # Safety
/// As for [`tile`].
#[allow(clippy::too_many_arguments)]
pub unsafe fn tile_rows(
    rows: usize,
    pairs: usize,
    a: *const u32,
    lda: usize,
    b: *const u16,
    c: *mut f32,
    ldc: usize,
    ncols: usize,
    start: Start,
) {
    macro_rules! go {
        ($($r:literal)*) => {
            match rows {
                $($r => tile::<$r>(pairs, a, lda, b, c, ldc, ncols, start),)*
                _ => unreachable!("1..=MR rows"),
            }
        };
    }
    go!(1 2 3 4 5 6 7 8 9 10 11 12)
}
