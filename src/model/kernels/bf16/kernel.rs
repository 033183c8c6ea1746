//! The AVX512-BF16 micro-kernel and the A-side packing. `vdpbf16ps` multiplies pairs of bf16
//! along the contraction and adds both products to one f32 lane: for C += A B it wants A's
//! (row, k-pair) broadcast as one 32-bit word and B as 16 columns x 2 k per vector, which is how
//! [`super::PackedB`] lays B out. MR x 32 outputs per call (24 accumulators, 2 B vectors, one
//! broadcast: 27 of 32 zmm registers), so every loaded B vector feeds MR instructions.
#![allow(clippy::missing_safety_doc)]
use super::matrix::{to_bf16, MatRef, MR, NR};
use std::arch::x86_64::*;

/// A's rows r0..r0+rows (rows <= MR), k-pairs kp0..kp0+pairs, as [pair][MR] words (two bf16
/// each, the lower k in the low half); rows past `rows` and k past `k` are zero.
///
/// # Safety
/// The CPU must have AVX512F and AVX512-BF16; `a` must hold every element it names.
#[target_feature(enable = "avx512f,avx512bf16")]
pub unsafe fn pack_a(
    a: &MatRef,
    r0: usize,
    rows: usize,
    kp0: usize,
    pairs: usize,
    k: usize,
    out: &mut [u32],
) {
    debug_assert!(out.len() >= pairs * MR);
    let (k0, k1) = (2 * kp0, (2 * (kp0 + pairs)).min(k));
    for i in 0..rows {
        let base = (r0 + i) * a.rs;
        let mut c = k0;
        if a.cs == 1 {
            // 32 contiguous floats -> 16 words at a time
            while c + 32 <= k1 {
                let p = a.data.as_ptr().add(base + c);
                let lo = _mm512_loadu_ps(p);
                let hi = _mm512_loadu_ps(p.add(16));
                let v: __m512i = std::mem::transmute(_mm512_cvtne2ps_pbh(hi, lo));
                let mut words = [0u32; 16];
                _mm512_storeu_si512(words.as_mut_ptr().cast(), v);
                let q0 = (c - k0) / 2;
                for (t, w) in words.iter().enumerate() {
                    *out.get_unchecked_mut((q0 + t) * MR + i) = *w;
                }
                c += 32;
            }
        }
        while c < k1 {
            let lo = to_bf16(*a.data.get_unchecked(base + c * a.cs)) as u32;
            let hi = if c + 1 < k1 {
                to_bf16(*a.data.get_unchecked(base + (c + 1) * a.cs)) as u32
            } else {
                0
            };
            *out.get_unchecked_mut((c - k0) / 2 * MR + i) = lo | (hi << 16);
            c += 2;
        }
        for q in (k1 - k0).div_ceil(2)..pairs {
            out[q * MR + i] = 0;
        }
    }
    for q in 0..pairs {
        for i in rows..MR {
            out[q * MR + i] = 0;
        }
    }
}

/// C[R x ncols] (row stride ldc) = (C +) packed A (R rows) x one packed B panel, over `pairs`
/// k-pairs. Columns past `ncols` (<= 32) are neither read nor written.
///
/// # Safety
/// AVX512F and AVX512-BF16; `a` holds pairs * MR words, `b` pairs * 64 halves, and `c` every
/// element of the R x ncols block.
#[target_feature(enable = "avx512f,avx512bf16")]
pub unsafe fn tile<const R: usize>(
    pairs: usize,
    a: *const u32,
    b: *const u16,
    c: *mut f32,
    ldc: usize,
    ncols: usize,
    accumulate: bool,
) {
    let mut acc = [[_mm512_setzero_ps(); 2]; R];
    for p in 0..pairs {
        let b0: __m512bh = std::mem::transmute(_mm512_loadu_si512(b.add(p * 2 * NR).cast()));
        let b1: __m512bh = std::mem::transmute(_mm512_loadu_si512(b.add(p * 2 * NR + NR).cast()));
        let ap = a.add(p * MR);
        for (i, row) in acc.iter_mut().enumerate() {
            let av: __m512bh = std::mem::transmute(_mm512_set1_epi32(*ap.add(i) as i32));
            row[0] = _mm512_dpbf16_ps(row[0], av, b0);
            row[1] = _mm512_dpbf16_ps(row[1], av, b1);
        }
    }
    let mask = |lo: usize| -> __mmask16 {
        let n = ncols.saturating_sub(lo).min(16);
        ((1u32 << n) - 1) as __mmask16
    };
    let (m0, m1) = (mask(0), mask(16));
    for (i, row) in acc.iter().enumerate() {
        let cp = c.add(i * ldc);
        let (mut x0, mut x1) = (row[0], row[1]);
        if accumulate {
            x0 = _mm512_add_ps(x0, _mm512_maskz_loadu_ps(m0, cp));
            x1 = _mm512_add_ps(x1, _mm512_maskz_loadu_ps(m1, cp.add(16)));
        }
        _mm512_mask_storeu_ps(cp, m0, x0);
        _mm512_mask_storeu_ps(cp.add(16), m1, x1);
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
    b: *const u16,
    c: *mut f32,
    ldc: usize,
    ncols: usize,
    accumulate: bool,
) {
    macro_rules! go {
        ($($r:literal)*) => {
            match rows {
                $($r => tile::<$r>(pairs, a, b, c, ldc, ncols, accumulate),)*
                _ => unreachable!("1..=MR rows"),
            }
        };
    }
    go!(1 2 3 4 5 6 7 8 9 10 11 12)
}
