//! exp in f32 that the compiler can vectorise: libm's expf is a scalar call per element, and the
//! attention softmax takes b * heads * s * s of them per layer (twice in training). Cephes' expf
//! scheme: exp(x) = 2^n exp(r), n = round(x / ln 2) (rounded by adding 1.5 * 2^23, which needs no
//! SSE4.1 round instruction), r = x - n ln 2 in two parts, exp(r) by a degree-7 polynomial; within
//! 2 ulp of expf. Below the smallest normal result it returns exactly 0, so padded keys keep no
//! weight at all.
const LOG2E: f32 = std::f32::consts::LOG2_E;
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
const ROUND: f32 = 12_582_912.0; // 1.5 * 2^23

#[inline(always)]
pub fn exp_f32(x: f32) -> f32 {
    let xc = x.clamp(-87.0, 88.0);
    let n = (xc * LOG2E + ROUND) - ROUND;
    let r = xc - n * LN2_HI - n * LN2_LO;
    let p = ((((((1.987_569_1e-4 * r + 1.398_2e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2) * r
        + 1.666_666_5e-1)
        * r
        + 0.5)
        * r
        * r)
        + r
        + 1.0;
    let scaled = p * f32::from_bits(((n as i32 + 127) << 23) as u32);
    if x < -87.0 {
        0.0
    } else {
        scaled
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn within_two_ulp_of_expf_and_zero_below_range() {
        let mut x = -87.0f32;
        while x < 88.0 {
            let (ours, std) = (super::exp_f32(x), x.exp());
            let ulp = (ours.to_bits() as i64 - std.to_bits() as i64).abs();
            assert!(ulp <= 2, "x {x}: {ours} vs {std} ({ulp} ulp)");
            x += 0.013_7;
        }
        assert_eq!(super::exp_f32(-1e30), 0.0);
        assert_eq!(super::exp_f32(f32::MIN), 0.0);
        assert_eq!(super::exp_f32(0.0), 1.0);
    }
}
