//! exp in f32 that the compiler can vectorise: libm's expf is a scalar call per element, and the
//! attention softmax takes b * heads * s * s of them per layer (twice in training). One
//! polynomial, 2^f on [-1/2, 1/2] (`EXP2_POLY`), serves every exp of condenser's kernels:
//! - `exp2_small(u)` = 2^round(u) 2^f: a softmax's exponents in base 2, (s - max) scale log2(e),
//!   the scale riding in one fused multiply-add; u - round(u) is exact, so no reduction by ln 2
//!   (the attention kernel's softmax loop compiled to ~21 instructions a vector against ~26 for
//!   the natural-base exp: issue 35, Zen 3);
//! - `exp_f32(x)` = 2^n 2^(r log2 e), n = round(x / ln 2), r = x - n ln 2 in two parts (Cephes'
//!   reduction: r is exact to f32, where x log2 e rounded whole would lose |x| 2^-24 of exponent,
//!   ~80 ulp near the top);
//! - the bf16 attention kernel's AVX-512 exp (bf16/attention.rs), the same coefficients.
//!
//! Both within 2 ulp of the exact value (tests below). Below the smallest normal result they
//! return exactly 0, so padded keys keep no weight at all; above the largest finite one, exp_f32
//! gives infinity (and NaN stays NaN), so an overflow reaches the loss instead of passing as e^88.
//!
//! Written with fused multiply-adds: in a CPU class's copy (`dispatch!`, which enables FMA) each
//! is one instruction, about a fifth faster over a softmax row than separate multiplies and adds
//! (issue 35, Zen 3); outside one, `mul_add` is a libm call per element, so callers are kernels
//! compiled through `dispatch!` (results are the same bits either way: fmaf rounds once).
const LOG2E: f32 = std::f32::consts::LOG2_E;
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
const ROUND: f32 = 12_582_912.0; // 1.5 * 2^23
/// ln(f32::MAX): above it exp overflows.
const MAX_ARG: f32 = 88.722_83;

/// 2^f for |f| <= 1/2, highest degree first (a degree-6 fit; its own error 2e-9, far below an
/// f32 ulp): `exp2_poly` and the bf16 attention kernel's vector loop evaluate it by Horner's
/// rule from `EXP2_POLY[0]`.
pub const EXP2_POLY: [f32; 7] = [
    1.535_336e-4,
    1.339_887_6e-3,
    9.618_438e-3,
    5.550_332_4e-2,
    2.402_264_8e-1,
    6.931_472e-1,
    1.0,
];

/// 2^f for |f| <= 1/2, by `EXP2_POLY`.
#[inline(always)]
fn exp2_poly(f: f32) -> f32 {
    let mut p = EXP2_POLY[0];
    for &c in &EXP2_POLY[1..] {
        p = p.mul_add(f, c);
    }
    p
}

#[inline(always)]
pub fn exp_f32(x: f32) -> f32 {
    let xc = x.clamp(-87.0, MAX_ARG);
    let t = xc.mul_add(LOG2E, ROUND);
    let n = t - ROUND;
    let r = n.mul_add(-LN2_LO, n.mul_add(-LN2_HI, xc));
    let p = exp2_poly(r * LOG2E);
    // n read from t's bits (t = 1.5 * 2^23 + n, one unit a step), not by `as i32`: Rust's
    // saturating float-to-int cast kept the loops calling this scalar (issue 35's profile)
    let n = t.to_bits() as i32 - ROUND.to_bits() as i32;
    // 2^n in two halves: n reaches 128 near the top, whose single power of two is not an f32
    let half = n >> 1;
    let scaled = p * pow2(half) * pow2(n - half);
    if x < -87.0 {
        0.0
    } else if x > MAX_ARG {
        f32::INFINITY
    } else {
        scaled
    }
}

/// 2^u for u at most a few units above 0, as a softmax's (s - max) log2(e) scale. Within 2 ulp
/// of 2^u; below -125 exactly 0; NaN stays NaN.
#[inline(always)]
pub fn exp2_small(u: f32) -> f32 {
    debug_assert!(
        u.is_nan() || u <= 120.0,
        "exp2_small({u}): the argument must stay small"
    );
    // `if`, not `max`: max(NaN, -125) would turn a NaN into a number
    let uc = if u < -125.0 { -125.0 } else { u };
    let t = uc + ROUND;
    let n = t - ROUND;
    let f = uc - n; // exact: n is uc rounded to an integer, |f| <= 1/2
    let p = exp2_poly(f);
    // a multiply by 2^n, not an add into p's exponent bits: a NaN's payload bits would move that
    let y = p * pow2(t.to_bits() as i32 - ROUND.to_bits() as i32);
    // 0 below the range as a mask of the bits, not a second `if` on u < -125: with two, LLVM
    // made one branch of them and ran the attention kernel's exp a score at a time (Zen 5)
    let below = (u < -125.0) as u32;
    f32::from_bits(y.to_bits() & below.wrapping_sub(1))
}

/// `exp2_small` on 16 lanes of AVX-512, the same bits lane by lane (NaN stays NaN, below -125
/// exactly 0): u rounded to the nearest integer (ties to even, as adding 1.5 * 2^23 rounds) by
/// `vrndscaleps`, the same polynomial of the exact remainder, and the power of two applied by
/// `vscalefps`, exact where the result is normal (u >= -125 keeps p 2^n above 2^-126). About half
/// the instructions of the portable form a score: on AMD Zen 4, which splits every 512-bit
/// instruction in two halves, the portable form's 8-lane loop was bound by the operations in
/// flight, not by its arithmetic (issue 57).
///
/// # Safety
/// AVX512F present.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
pub unsafe fn exp2_small_x16(u: std::arch::x86_64::__m512) -> std::arch::x86_64::__m512 {
    use std::arch::x86_64::*;
    let lo = _mm512_set1_ps(-125.0);
    // kept where not below -125, or NaN (`max` returns its second operand for a NaN, so a NaN
    // stays NaN through the polynomial)
    let keep = _mm512_cmp_ps_mask::<_CMP_NLT_UQ>(u, lo);
    let uc = _mm512_max_ps(lo, u);
    let whole = _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(uc);
    let f = _mm512_sub_ps(uc, whole); // exact, |f| <= 1/2
    let mut poly = _mm512_set1_ps(EXP2_POLY[0]);
    for &c in &EXP2_POLY[1..] {
        poly = _mm512_fmadd_ps(poly, f, _mm512_set1_ps(c));
    }
    _mm512_maskz_scalef_ps(keep, poly, whole)
}

/// 2^k as an f32, for -126 <= k <= 127.
#[inline(always)]
fn pow2(k: i32) -> f32 {
    f32::from_bits(((k + 127) << 23) as u32)
}

#[cfg(test)]
mod tests {
    #[test]
    fn within_two_ulp_of_expf_and_zero_below_range() {
        let mut x = -87.0f32;
        while x < 88.72 {
            let (ours, std) = (super::exp_f32(x), x.exp());
            let ulp = (ours.to_bits() as i64 - std.to_bits() as i64).abs();
            assert!(ulp <= 2, "x {x}: {ours} vs {std} ({ulp} ulp)");
            x += 0.013_7;
        }
        assert_eq!(super::exp_f32(-1e30), 0.0);
        assert_eq!(super::exp_f32(f32::MIN), 0.0);
        assert_eq!(super::exp_f32(0.0), 1.0);
    }

    /// The base-2 exp within 2 ulp of 2^u (f64) over softmax's range, 0 below it, NaN for NaN.
    #[test]
    fn base_two_exp_within_two_ulp() {
        let mut u = -125.0f32;
        while u < 4.0 {
            let (ours, want) = (super::exp2_small(u), (u as f64).exp2() as f32);
            let ulp = (ours.to_bits() as i64 - want.to_bits() as i64).abs();
            assert!(ulp <= 2, "u {u}: {ours} vs {want} ({ulp} ulp)");
            u += 0.000_731;
        }
        for u in [-125.5f32, -1e30, f32::NEG_INFINITY] {
            assert_eq!(super::exp2_small(u), 0.0, "u {u}");
        }
        assert_eq!(super::exp2_small(0.0), 1.0);
        // NaNs with payload bits in every place the exponent's arithmetic could touch
        for bits in [
            0x7fc0_0000u32,
            0x7fc0_0001,
            0x7fc0_01ff,
            0xffc0_0000,
            0x7f80_0001,
        ] {
            assert!(
                super::exp2_small(f32::from_bits(bits)).is_nan(),
                "{bits:#x}"
            );
        }
    }

    /// The AVX-512 form gives `exp2_small`'s bits lane by lane over the softmax's range, below
    /// it (0) and for NaNs (NaN).
    #[test]
    fn sixteen_lanes_give_the_scalar_bits() {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx512f") {
            use std::arch::x86_64::*;
            let mut us: Vec<f32> = (0..200_000)
                .map(|i| -130.0 + i as f32 * 0.000_673)
                .collect();
            us.extend([
                f32::NAN,
                -f32::NAN,
                f32::NEG_INFINITY,
                -125.0,
                -125.5,
                0.5,
                -0.5,
            ]);
            us.extend([1.5, 2.5, -2.5, -124.5, 100.0, 120.0, -1e30]);
            while !us.len().is_multiple_of(16) {
                us.push(0.25);
            }
            for chunk in us.chunks_exact(16) {
                let mut got = [0f32; 16];
                // SAFETY: AVX512F detected above
                unsafe {
                    let v = super::exp2_small_x16(_mm512_loadu_ps(chunk.as_ptr()));
                    _mm512_storeu_ps(got.as_mut_ptr(), v);
                }
                for (&u, &g) in chunk.iter().zip(&got) {
                    let want = super::exp2_small(u);
                    assert!(
                        g.to_bits() == want.to_bits() || (g.is_nan() && want.is_nan()),
                        "u {u}: {g} against {want}"
                    );
                }
            }
            return;
        }
        crate::runtime::skipped(
            "the AVX-512 exp's test",
            "avx512",
            "this CPU has no AVX-512",
        );
    }

    /// Overflow is infinity, not a cap at e^88, and NaN stays NaN: a loss that overflows shows.
    #[test]
    fn overflow_is_infinite_and_nan_stays_nan() {
        assert_eq!(super::exp_f32(88.73), f32::INFINITY);
        assert_eq!(super::exp_f32(1e30), f32::INFINITY);
        assert!(super::exp_f32(88.7).is_finite() && super::exp_f32(88.7) > 3.3e38);
        assert!(super::exp_f32(f32::NAN).is_nan());
    }
}
