//! The f32 kernel's one packing scheme: a right operand B (k x n) as panels of `NR` columns, each
//! `[k][NR]` (columns past n zeros), which the register tiles read NR values a step. The
//! frozen weights (B = W^T, per k-block: `PackedF32::weight`) and the attention kernel's keys
//! (B = K^T) and values (B = V) are packed by these two functions alone.
use super::NR;

/// B = W^T from W's n rows (`ld` apart, k wide) into `out` in panels (`out[p NR k + kk NR + j]` =
/// `W[p NR + j][kk]`; zeros past row n). On AVX2 eight rows by eight columns at a time through an
/// 8 x 8 register transpose: element by element this was a tenth of the attention kernel on
/// 187-token texts (perf, Zen 3, issue 35).
pub fn pack_transposed(w: &[f32], ld: usize, n: usize, k: usize, out: &mut [f32]) {
    let np = n.div_ceil(NR) * NR;
    assert!(out.len() >= np * k && (n == 0 || (ld >= k && w.len() >= (n - 1) * ld + k)));
    #[cfg(target_arch = "x86_64")]
    if k.is_multiple_of(8)
        && crate::model::kernels::isa::active() >= crate::model::kernels::isa::Isa::Avx2
    {
        // SAFETY: AVX2 detected; the bounds are asserted above
        return unsafe { transposed_avx2(w, ld, n, k, out) };
    }
    for (p, panel) in out[..np * k].chunks_exact_mut(NR * k).enumerate() {
        for j in 0..NR {
            let r = p * NR + j;
            let row = (r < n).then(|| &w[r * ld..r * ld + k]);
            for kk in 0..k {
                panel[kk * NR + j] = row.map_or(0.0, |x| x[kk]);
            }
        }
    }
}

/// B from its k rows (`ld` apart, n wide) into `out` in panels (`out[c NR k + kk NR + j]` =
/// `B[kk][c NR + j]`; zeros past column n): each panel's rows contiguous, where read in place
/// every step of the tile was a new cache line (a head's values, 3 hidden floats apart).
pub fn pack_rows(b: &[f32], ld: usize, k: usize, n: usize, out: &mut [f32]) {
    let panels = n.div_ceil(NR);
    assert!(out.len() >= panels * NR * k && (k == 0 || (ld >= n && b.len() >= (k - 1) * ld + n)));
    for (c, panel) in out[..panels * NR * k].chunks_exact_mut(NR * k).enumerate() {
        let (j0, cols) = (c * NR, NR.min(n - c * NR));
        for (kk, dst) in panel.chunks_exact_mut(NR).enumerate() {
            let src = &b[kk * ld + j0..kk * ld + j0 + cols];
            match (<&mut [f32; NR]>::try_from(dst), <&[f32; NR]>::try_from(src)) {
                // a whole panel row as one fixed-size copy (two or four vector moves): with the
                // length known only at run time each row was a memmove call, 5.5% of the
                // attention kernel on 187-token texts (perf, Zen 4, issue 57)
                (Ok(dst), Ok(src)) => *dst = *src,
                (Err(_), _) => unreachable!("chunks of NR"),
                (Ok(dst), Err(_)) => {
                    dst[..cols].copy_from_slice(src);
                    dst[cols..].fill(0.0);
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn transposed_avx2(w: &[f32], ld: usize, n: usize, k: usize, out: &mut [f32]) {
    use std::arch::x86_64::*;
    let (wp, tp) = (w.as_ptr(), out.as_mut_ptr());
    for j0 in (0..n.div_ceil(NR) * NR).step_by(8) {
        let (p, jj) = (j0 / NR, j0 % NR);
        for dd0 in (0..k).step_by(8) {
            let row = |i: usize| {
                if j0 + i < n {
                    _mm256_loadu_ps(wp.add((j0 + i) * ld + dd0))
                } else {
                    _mm256_setzero_ps()
                }
            };
            let (r0, r1, r2, r3) = (row(0), row(1), row(2), row(3));
            let (r4, r5, r6, r7) = (row(4), row(5), row(6), row(7));
            let (t0, t1) = (_mm256_unpacklo_ps(r0, r1), _mm256_unpackhi_ps(r0, r1));
            let (t2, t3) = (_mm256_unpacklo_ps(r2, r3), _mm256_unpackhi_ps(r2, r3));
            let (t4, t5) = (_mm256_unpacklo_ps(r4, r5), _mm256_unpackhi_ps(r4, r5));
            let (t6, t7) = (_mm256_unpacklo_ps(r6, r7), _mm256_unpackhi_ps(r6, r7));
            // (columns c | c + 4, c + 1 | c + 5) of four rows from two unpacked pairs
            let pairs = |a, b| {
                (
                    _mm256_shuffle_ps::<0x44>(a, b),
                    _mm256_shuffle_ps::<0xEE>(a, b),
                )
            };
            let ((u0, u1), (u2, u3)) = (pairs(t0, t2), pairs(t1, t3));
            let ((u4, u5), (u6, u7)) = (pairs(t4, t6), pairs(t5, t7));
            // column i of the 8 x 8 block: element dd0 + i of the eight rows
            let cols = [
                _mm256_permute2f128_ps::<0x20>(u0, u4),
                _mm256_permute2f128_ps::<0x20>(u1, u5),
                _mm256_permute2f128_ps::<0x20>(u2, u6),
                _mm256_permute2f128_ps::<0x20>(u3, u7),
                _mm256_permute2f128_ps::<0x31>(u0, u4),
                _mm256_permute2f128_ps::<0x31>(u1, u5),
                _mm256_permute2f128_ps::<0x31>(u2, u6),
                _mm256_permute2f128_ps::<0x31>(u3, u7),
            ];
            for (i, c) in cols.into_iter().enumerate() {
                _mm256_storeu_ps(tp.add(p * NR * k + (dd0 + i) * NR + jj), c);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::kernels::test_data;

    /// Both packings against their index formulas, with edge panels, on every path this CPU runs
    /// (the AVX2 transposes where k is a multiple of 8, the element loop elsewhere).
    #[test]
    fn panels_hold_b_as_the_tiles_read_it() {
        for &(n, k) in &[(1, 8), (16, 32), (17, 32), (40, 24), (33, 5), (5, 3)] {
            let ld = k + 3;
            let w = test_data(n * ld, 7);
            let np = n.div_ceil(NR) * NR;
            let mut out = vec![f32::NAN; np * k];
            pack_transposed(&w, ld, n, k, &mut out);
            for p in 0..np / NR {
                for kk in 0..k {
                    for j in 0..NR {
                        let r = p * NR + j;
                        let want = if r < n { w[r * ld + kk] } else { 0.0 };
                        assert_eq!(out[p * NR * k + kk * NR + j], want, "W^T {n}x{k}");
                    }
                }
            }
            // B rows: k rows of n
            let b = test_data(k * (n + 2), 9);
            let mut out = vec![f32::NAN; np * k];
            pack_rows(&b, n + 2, k, n, &mut out);
            for c in 0..np / NR {
                for kk in 0..k {
                    for j in 0..NR {
                        let col = c * NR + j;
                        let want = if col < n { b[kk * (n + 2) + col] } else { 0.0 };
                        assert_eq!(out[c * NR * k + kk * NR + j], want, "B {k}x{n}");
                    }
                }
            }
        }
    }
}
