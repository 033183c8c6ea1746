//! The register tiles of the f32 kernel. Both compute each output element as one chain of fused
//! multiply-adds in k order, starting from the bias (or C), so the AVX-512 tile's results are bit
//! for bit the AVX2 tile's: which one runs never changes a number.
/// Output columns a tile covers (two 8-lane vectors).
pub const NR: usize = 16;
/// Rows a tile covers: 12 accumulators + 2 B vectors + 1 broadcast of the 16 ymm registers.
pub const MR: usize = 6;
/// Rows the AVX-512 tile covers (against two panels): 24 accumulators + 2 B vectors + 1
/// broadcast of the 32 zmm registers.
pub const WR: usize = 12;

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// The 6 x 16 register tile: C[0..6][0..16] = bias (or C) + sum over kb of A[r][k] B[k][0..16].
/// A's six rows are broadcast one value at a time from where they lie (stride lda); B's panel
/// is read 16 values a step.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn tile(
    kb: usize,
    a: *const f32,
    lda: usize,
    b: *const f32,
    c: *mut f32,
    ldc: usize,
    bias: Option<*const f32>,
) {
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

/// The AVX-512 tile: WR rows x two panels (32 columns), 24 accumulators, two B vectors and a
/// broadcast of the 32 zmm registers; C[r][0..32] = bias (or C) + sum over kb of A[r][k] (B0[k],
/// B1[k]). Each loaded B vector feeds WR multiply-adds (the AVX2 tile's: 6), so the loads stay
/// under one a multiply-add on CPUs with two 512-bit FMA ports. On AMD Zen 4, which runs a
/// 512-bit FMA as two 256-bit halves, it halves the instructions for the same FLOPs.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn tile_wide(
    kb: usize,
    a: *const f32,
    lda: usize,
    b0: *const f32,
    b1: *const f32,
    c: *mut f32,
    ldc: usize,
    bias: Option<*const f32>,
) {
    let row = |r: usize| c.add(r * ldc);
    let mut acc = [[_mm512_setzero_ps(); 2]; WR];
    for (r, x) in acc.iter_mut().enumerate() {
        let p = bias.unwrap_or(row(r));
        *x = [_mm512_loadu_ps(p), _mm512_loadu_ps(p.add(NR))];
    }
    for kk in 0..kb {
        let y0 = _mm512_loadu_ps(b0.add(kk * NR));
        let y1 = _mm512_loadu_ps(b1.add(kk * NR));
        for (r, x) in acc.iter_mut().enumerate() {
            let v = _mm512_set1_ps(*a.add(r * lda + kk));
            x[0] = _mm512_fmadd_ps(v, y0, x[0]);
            x[1] = _mm512_fmadd_ps(v, y1, x[1]);
        }
    }
    for (r, x) in acc.iter().enumerate() {
        _mm512_storeu_ps(row(r), x[0]);
        _mm512_storeu_ps(row(r).add(NR), x[1]);
    }
}
