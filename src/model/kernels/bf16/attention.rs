//! One head of self-attention with its two products in bf16 (inference in bf16 precision), as
//! torch's bf16 models run attention: q, k and v rounded to bf16, the scores q k^T summed in f32
//! by the bf16 tile, the softmax in f32 (`head_attention::softmax_rows`, the f32 kernel's), the
//! unnormalised probabilities rounded to bf16 for the context's product, the 1 / sum applied to
//! the f32 context rows. The f32 kernel (`head_attention`) ran both products at the f32 FMA
//! rate, 17% of a bf16 document encode (perf, Zen 4, issue 35); `vdpbf16ps` does twice the
//! multiply-adds an instruction.
//!
//! Layouts are the bf16 GEMM's: the left operand as rows of k-pair words read where they lie
//! (the queries, all rows converted once; a block's probabilities), the right one in panels of
//! NR columns x k-pairs (the keys as K^T, NR keys a panel; the values, NR head columns a panel).
//! Keys past the text's end are zero words (their scores set to -inf by the softmax); values
//! past it zero, so the padding's zero probabilities multiply zeros, never stale NaNs.
use super::kernel::{tile_rows, Start};
use super::matrix::{to_bf16, MR, NR};
use crate::model::kernels::head_attention::{pack_keys, prefetch_now, softmax_rows, HeadIn, C};

// a bf16 panel of keys is whole f32 panels of `pack_keys`
const _: () = assert!(NR.is_multiple_of(C));

/// Whether this kernel runs a head `d` wide here: AVX512-BF16, whole panels of NR head columns.
pub fn serves(d: usize) -> bool {
    d > 0 && d.is_multiple_of(NR) && super::supported()
}

/// Two values as one k-pair word: the first in the low half, as `vdpbf16ps` pairs them. Loops
/// calling it over two rows element by element vectorise; a row's consecutive pairs are its bf16
/// values in order (`halves`).
#[inline(always)]
fn word(lo: f32, hi: f32) -> u32 {
    to_bf16(lo) as u32 | (to_bf16(hi) as u32) << 16
}

/// Words seen as their bf16 halves, two a word (low half first: x86 is little-endian).
fn halves(w: &mut [u32]) -> &mut [u16] {
    // SAFETY: the same memory as twice as many u16, of a smaller alignment
    unsafe { std::slice::from_raw_parts_mut(w.as_mut_ptr().cast::<u16>(), 2 * w.len()) }
}

/// The sizes of `head_forward`'s scratch parts for `n` tokens `d` wide, in 4-byte units: the
/// queries' words (n x d/2), the keys' panels (np x d/2), the values' panels (np/2 x d), a
/// block's probability words (MR x np/2), a block's f32 scores (MR x np), the keys transposed
/// in f32 (np x d, `head_attention::pack_keys`); np = n in whole panels.
fn parts(n: usize, d: usize) -> [usize; 6] {
    let np = n.div_ceil(NR) * NR;
    [
        n * d / 2,
        np * d / 2,
        np / 2 * d,
        MR * np / 2,
        MR * np,
        np * d,
    ]
}

/// Scratch floats `head_forward` needs for `n` tokens `d` wide.
pub fn scratch_len(n: usize, d: usize) -> usize {
    parts(n, d).iter().sum()
}

/// ctx (n x d, packed) = softmax(q k^T * scale) v in bf16 products and `lse[i]` = row i's
/// log-sum-exp of the scaled scores, as `head_attention::head_forward` gives them in f32.
/// `scratch` holds at least `scratch_len(n, d)` floats; `serves(d)` holds.
pub fn head_forward(x: HeadIn<'_>, scratch: &mut [f32], ctx: &mut [f32], lse: &mut [f32]) {
    let HeadIn {
        q, k, v, ld, n, d, ..
    } = x;
    assert!(
        serves(d),
        "the bf16 attention kernel does not serve d = {d} here"
    );
    assert!(ctx.len() >= n * d && lse.len() >= n && scratch.len() >= scratch_len(n, d));
    let fits = |m: &[f32]| n == 0 || m.len() >= (n - 1) * ld + d;
    assert!(
        ld >= d && fits(q) && fits(k) && fits(v),
        "a head's rows out of bounds"
    );
    if n == 0 {
        return;
    }
    // SAFETY: AVX512-BF16 checked by `serves`, every bound asserted above
    unsafe { forward(x, scratch, ctx, lse) }
}

/// # Safety
/// As `head_forward` asserts.
#[target_feature(enable = "avx512f,avx512bf16")]
unsafe fn forward(x: HeadIn<'_>, scratch: &mut [f32], ctx: &mut [f32], lse: &mut [f32]) {
    let HeadIn {
        q,
        k,
        v,
        ld,
        n,
        d,
        scale,
    } = x;
    let np = n.div_ceil(NR) * NR;
    let (dp, kp) = (d / 2, np / 2);
    let scale2 = scale * std::f32::consts::LOG2_E;
    let [qn, kn, vn, pn, sn, _] = parts(n, d);
    let (words, rest) = scratch.split_at_mut(qn + kn + vn + pn);
    let (s, kt) = rest.split_at_mut(sn);
    // SAFETY: the same memory seen as u32, which has f32's size and alignment and no invalid bits
    let words = std::slice::from_raw_parts_mut(words.as_mut_ptr().cast::<u32>(), words.len());
    let (qw, rest) = words.split_at_mut(qn);
    let (kw, rest) = rest.split_at_mut(kn);
    let (vw, pw) = rest.split_at_mut(vn);
    let s = &mut s[..MR * np];
    prefetch_now(&x);
    for (i, row) in halves(qw).chunks_exact_mut(d).enumerate() {
        row.iter_mut()
            .zip(&q[i * ld..i * ld + d])
            .for_each(|(h, &x)| *h = to_bf16(x));
    }
    // K^T: panel p holds, pair by pair, the words of keys pNR .. pNR + NR; from the keys
    // transposed in f32 (register transposes), two dims' rows of C keys make C words
    pack_keys(k, ld, n, d, kt);
    let panels16 = n.div_ceil(C);
    for (p, panel) in kw.chunks_exact_mut(dp * NR).enumerate() {
        for t in 0..dp {
            for half in 0..NR / C {
                let out = &mut panel[t * NR + half * C..][..C];
                let p16 = p * (NR / C) + half;
                if p16 < panels16 {
                    let rows = &kt[p16 * C * d + 2 * t * C..][..2 * C];
                    let (a, b) = rows.split_at(C);
                    for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
                        *o = word(x, y);
                    }
                } else {
                    out.fill(0);
                }
            }
        }
    }
    // V: panel c holds, key pair by key pair, head columns cNR .. cNR + NR
    for (c, panel) in vw.chunks_exact_mut(kp * NR).enumerate() {
        for (t, out) in panel.chunks_exact_mut(NR).enumerate() {
            let row = |key: usize| (key < n).then(|| &v[key * ld + c * NR..][..NR]);
            match (row(2 * t), row(2 * t + 1)) {
                (Some(a), Some(b)) => {
                    for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
                        *o = word(x, y);
                    }
                }
                (Some(a), None) => out.iter_mut().zip(a).for_each(|(o, &x)| *o = word(x, 0.0)),
                _ => out.fill(0),
            }
        }
    }
    let pairs = n.div_ceil(2);
    for i0 in (0..n).step_by(MR) {
        let rows = MR.min(n - i0);
        // rows past the text's end: zero scores, computed by the softmax's vector loop, unread
        s[rows * np..].fill(0.0);
        for (p, panel) in kw.chunks_exact(dp * NR).enumerate() {
            let (a, b) = (qw.as_ptr().add(i0 * dp), panel.as_ptr().cast::<u16>());
            tile_rows(
                rows,
                dp,
                a,
                dp,
                b,
                s.as_mut_ptr().add(p * NR),
                np,
                NR,
                Start::Zero,
            );
        }
        let inv = softmax_rows::<MR, 16>(s, np, n, rows, scale2, &mut lse[i0..]);
        for (out, row) in halves(pw)
            .chunks_exact_mut(np)
            .zip(s.chunks_exact(np))
            .take(rows)
        {
            out.iter_mut().zip(row).for_each(|(h, &x)| *h = to_bf16(x));
        }
        for (c, panel) in vw.chunks_exact(kp * NR).enumerate() {
            let out = ctx.as_mut_ptr().add(i0 * d + c * NR);
            let b = panel.as_ptr().cast::<u16>();
            tile_rows(rows, pairs, pw.as_ptr(), kp, b, out, d, NR, Start::Zero);
        }
        for (r, row) in ctx[i0 * d..(i0 + rows) * d].chunks_exact_mut(d).enumerate() {
            row.iter_mut().for_each(|o| *o *= inv[r]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::kernels::bf16::from_bf16;

    fn round(x: f32) -> f64 {
        from_bf16(to_bf16(x)) as f64
    }

    /// Against attention over the bf16-rounded q, k and v in f64: the log-sum-exp within f32
    /// rounding (the scores' products are exact in f32), the context within the probabilities'
    /// own rounding (each within 2^-8 of itself, so the context within 2^-8 sum p|v| / sum p) plus
    /// f32 rounding; head widths 32 and 64, lengths around the tiles' and panels' edges, inside a
    /// qkv buffer with other heads' columns between the rows. The scratch starts as NaN: nothing
    /// read may be left from before.
    #[test]
    fn head_forward_equals_rounded_attention_in_f64() {
        if !super::super::supported() {
            crate::runtime::skipped(
                "the bf16 attention kernel's test",
                "avx512bf16",
                "this CPU has no AVX512-BF16 (the kernel's instruction)",
            );
            return;
        }
        for &d in &[32, 64] {
            for &n in &[1, 2, 11, 12, 13, 31, 32, 33, 40, 131] {
                let ld = 3 * d + 8;
                let qkv: Vec<f32> = crate::model::kernels::test_data(n * ld + 2 * d, n as u32)
                    .into_iter()
                    .map(|x| 2.0 * x)
                    .collect();
                let (q, k, v) = (&qkv[..], &qkv[d..], &qkv[2 * d..]);
                let scale = 1.0 / (d as f32).sqrt();
                let mut scratch = vec![f32::NAN; scratch_len(n, d)];
                let (mut ctx, mut lse) = (vec![f32::NAN; n * d], vec![f32::NAN; n]);
                let x = HeadIn {
                    q,
                    k,
                    v,
                    ld,
                    n,
                    d,
                    scale,
                };
                head_forward(x, &mut scratch, &mut ctx, &mut lse);
                for i in 0..n {
                    let s: Vec<f64> = (0..n)
                        .map(|j| {
                            (0..d)
                                .map(|c| round(q[i * ld + c]) * round(k[j * ld + c]))
                                .sum::<f64>()
                                * scale as f64
                        })
                        .collect();
                    let m = s.iter().cloned().fold(f64::MIN, f64::max);
                    let p: Vec<f64> = s.iter().map(|x| (x - m).exp()).collect();
                    let z: f64 = p.iter().sum();
                    let got = lse[i] as f64;
                    assert!((got - m - z.ln()).abs() < 1e-5, "n {n} d {d} row {i}: lse");
                    for c in 0..d {
                        let vj = |j: usize| round(v[j * ld + c]);
                        let want: f64 = (0..n).map(|j| p[j] * vj(j)).sum::<f64>() / z;
                        let spread: f64 = (0..n).map(|j| p[j] * vj(j).abs()).sum::<f64>() / z;
                        let got = ctx[i * d + c] as f64;
                        assert!(
                            (got - want).abs() <= spread / 256.0 + 1e-5,
                            "n {n} d {d} ({i}, {c}): {got} vs {want}"
                        );
                    }
                }
            }
        }
    }
}
