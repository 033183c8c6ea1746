//! One head of self-attention with its two products in bf16 (inference in bf16 precision), as
//! torch's bf16 models run attention: q, k and v rounded to bf16, the scores q k^T summed in f32
//! by the bf16 tile, the softmax in f32 with its unnormalised probabilities rounded to bf16 for
//! the context's product as they are made (`probabilities`), the 1 / sum applied to the f32
//! context rows. The f32 kernel (`head_attention`) ran both products at the f32 FMA rate, 17% of
//! a bf16 document encode (perf, Zen 4, issue 35); `vdpbf16ps` does twice the multiply-adds an
//! instruction. Inference only, so no log-sum-exp is kept: a backward recomputes the scores in
//! f32 against the forward's, which bf16 scores would not match (`packed_attention::Products`).
//!
//! Layouts are the bf16 GEMM's: the left operand as rows of k-pair words read where they lie
//! (the queries, all rows converted once; a block's probabilities), the right one in panels of
//! NR columns x k-pairs packed as the GEMM packs its weights (`panels`: the keys as K^T, NR keys
//! a panel; the values, NR head columns a panel). Keys past the text's end are zero words
//! (their probabilities written as zeros); an odd text's last value pairs with a zero, so the
//! padding's zero probability multiplies zeros, never stale NaNs.
use super::amx::ROWS;
use super::kernel::Start;
use super::matrix::{halves, to_bf16, LINE, NR};
use super::panels::{pack_rows, pack_transposed, transposed_scratch};
use crate::model::kernels::fastmath::exp2_small_x16;
use crate::model::kernels::head_attention::{prefetch_now, HeadIn};

/// Whether this kernel runs a head `d` wide here: AVX512-BF16, whole panels of NR head columns.
pub fn serves(d: usize) -> bool {
    d > 0 && d.is_multiple_of(NR) && super::supported()
}

/// The sizes of `head_forward`'s scratch parts for `n` tokens `d` wide, in 4-byte units: the
/// queries' words (n x d/2, n rounded up to a strip of the AMX kernel: its tiles read whole
/// 16-row groups), the keys' panels (np x d/2), the values' panels (np/2 key pairs x d: the
/// AMX kernel runs over whole tile steps of keys, zeros past n), a strip's probability words
/// (ROWS x np/2), a strip's f32 scores (ROWS x np), the keys' packing scratch
/// (`panels::transposed_scratch`); np = n in whole panels, ROWS the taller strip (AMX's).
fn parts(n: usize, d: usize) -> [usize; 6] {
    let np = n.div_ceil(NR) * NR;
    [
        n.div_ceil(ROWS) * ROWS * d / 2,
        np * d / 2,
        np / 2 * d,
        ROWS * np / 2,
        ROWS * np,
        transposed_scratch(n, d),
    ]
}

/// Scratch floats `head_forward` needs for `n` tokens `d` wide: the parts, and up to a cache
/// line to start them on one (each part is whole lines, so every part then starts on one: an
/// AMX tile row that straddles two lines loads at half the rate).
pub fn scratch_len(n: usize, d: usize) -> usize {
    parts(n, d).iter().sum::<usize>() + LINE - 1
}

/// ctx (n x d, packed) = softmax(q k^T * scale) v in bf16 products, as
/// `head_attention::head_forward` gives it in f32. `scratch` holds at least `scratch_len(n, d)`
/// floats; `serves(d)` holds.
pub fn head_forward(x: HeadIn<'_>, scratch: &mut [f32], ctx: &mut [f32]) {
    head_forward_on(x, scratch, ctx, super::amx_enabled())
}

/// `head_forward` on the AMX kernel (`amx`, where usable) or the AVX512-BF16 one.
fn head_forward_on(x: HeadIn<'_>, scratch: &mut [f32], ctx: &mut [f32], amx: bool) {
    let HeadIn {
        q, k, v, ld, n, d, ..
    } = x;
    assert!(
        serves(d),
        "the bf16 attention kernel does not serve d = {d} here"
    );
    assert!(ctx.len() >= n * d && scratch.len() >= scratch_len(n, d));
    let fits = |m: &[f32]| n == 0 || m.len() >= (n - 1) * ld + d;
    assert!(
        ld >= d && fits(q) && fits(k) && fits(v),
        "a head's rows out of bounds"
    );
    if n == 0 {
        return;
    }
    let skip = scratch.as_ptr().align_offset(LINE * 4);
    let scratch = &mut scratch[skip..];
    // SAFETY: AVX512-BF16 checked by `serves`, every bound asserted above (AMX: `micro_kernel`
    // panics where it is not usable)
    unsafe { forward(x, scratch, ctx, amx) }
}

/// Strips of `MR` query rows on the AVX512-BF16 kernel, or of ROWS on the AMX one (`amx`): the
/// head width d and the padded key count np are whole tile steps (d is a multiple of NR = 32;
/// np of 32 keys, 16 key pairs).
///
/// # Safety
/// As `head_forward` asserts; with `amx`, AMX usable.
#[target_feature(enable = "avx512f,avx512bf16")]
unsafe fn forward(x: HeadIn<'_>, scratch: &mut [f32], ctx: &mut [f32], amx: bool) {
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
    prefetch_now(&x);
    // n rows (the padding to a whole strip is read by AMX tiles, its sums dropped)
    for (i, row) in halves(qw).chunks_exact_mut(d).take(n).enumerate() {
        row.iter_mut()
            .zip(&q[i * ld..i * ld + d])
            .for_each(|(h, &x)| *h = to_bf16(x));
    }
    // K^T: panel p holds, pair by pair, the words of keys pNR .. pNR + NR (zeros past n); V:
    // panel c holds, key pair by key pair, head columns cNR .. cNR + NR (an odd n's last key
    // paired with a zero)
    pack_transposed(k, ld, n, d, kt, kw);
    // a panel of values a NR-column group, each kp key pairs long: zeros past n's pairs
    let pairs = n.div_ceil(2);
    for (c, panel) in vw.chunks_exact_mut(kp * NR).enumerate() {
        pack_rows(&v[c * NR..], ld, n, NR, panel);
        panel[pairs * NR..].fill(0);
    }
    let (unit, run) = super::micro_kernel(amx);
    // the AMX kernel runs over whole tile steps of keys (the zero words past n); the other
    // stops at n's pairs
    let ctx_pairs = if amx { kp } else { pairs };
    for i0 in (0..n).step_by(unit) {
        let rows = unit.min(n - i0);
        for (p, panel) in kw.chunks_exact(dp * NR).enumerate() {
            let (a, b) = (qw.as_ptr().add(i0 * dp), panel.as_ptr().cast::<u16>());
            let out = s.as_mut_ptr().add(p * NR);
            run(rows, dp, a, dp, b, out, np, NR, Start::Zero);
        }
        let inv = probabilities(s, np, n, rows, scale2, halves(pw));
        for (c, panel) in vw.chunks_exact(kp * NR).enumerate() {
            let out = ctx.as_mut_ptr().add(i0 * d + c * NR);
            let b = panel.as_ptr().cast::<u16>();
            run(rows, ctx_pairs, pw.as_ptr(), kp, b, out, d, NR, Start::Zero);
        }
        for (r, row) in ctx[i0 * d..(i0 + rows) * d].chunks_exact_mut(d).enumerate() {
            row.iter_mut().for_each(|o| *o *= inv[r]);
        }
    }
}

/// A block's `rows` score rows (f32, `np` apart; keys from `n` on ignored) as unnormalised
/// probabilities 2^(s scale2 - max scale2) rounded to bf16 into `p`'s rows (`np` halves apart,
/// all `np` written: zeros past `n`); returns each row's 1 / sum of the f32 values.
/// One pass a row on AVX-512, `vcvtneps2bf16` writing the bf16 values as the exp makes them: the
/// f32 kernel's softmax in place and a conversion pass after were 38% of a 187-token head, this
/// pass is 22-26% (one thread, Zen 4, issue 35). 2^u is `fastmath::exp2_small`'s, 16 lanes at a
/// time (`exp2_small_x16`: the same polynomial, where a degree-4 fit of its own was once two
/// multiply-adds less a vector, but a second exp to keep right for a result rounded to bf16
/// either way); NaN scores stay NaN; 2^u below 2^-125 is 0.
///
/// # Safety
/// AVX512F and AVX512-BF16 present.
#[target_feature(enable = "avx512f,avx512bf16")]
unsafe fn probabilities(
    s: &[f32],
    np: usize,
    n: usize,
    rows: usize,
    scale2: f32,
    p: &mut [u16],
) -> [f32; ROWS] {
    use std::arch::x86_64::*;
    assert!(rows <= ROWS && 0 < n && n <= np && np.is_multiple_of(16));
    assert!(s.len() >= rows * np && p.len() >= rows * np);
    let vecs = n.div_ceil(16);
    let last: __mmask16 = if n.is_multiple_of(16) {
        0xffff
    } else {
        (1 << (n % 16)) - 1
    };
    // keys past n read as -inf: probability 0
    let load = |r: usize, j: usize| {
        let k = if j + 1 == vecs { last } else { 0xffff };
        let at = s.as_ptr().add(r * np + 16 * j);
        _mm512_mask_loadu_ps(_mm512_set1_ps(f32::NEG_INFINITY), k, at)
    };
    // every row's maximum first, so that no row's exp pass waits on its own maximum
    let mut maxes = [0f32; ROWS];
    for (r, m) in maxes.iter_mut().enumerate().take(rows) {
        let mut mx = load(r, 0);
        for j in 1..vecs {
            mx = _mm512_max_ps(mx, load(r, j));
        }
        // scale > 0, so the scaled maximum is the maximum scaled; its rounding shifts every
        // exponent of the row alike, which the 1 / sum undoes
        *m = _mm512_reduce_max_ps(mx) * scale2;
    }
    let s2 = _mm512_set1_ps(scale2);
    let mut inv = [0f32; ROWS];
    for (r, (&m, inv)) in maxes.iter().zip(&mut inv).enumerate().take(rows) {
        let (neg_m, out) = (_mm512_set1_ps(-m), p.as_mut_ptr().add(r * np));
        let mut sum = _mm512_setzero_ps();
        for j in 0..vecs {
            let e = exp2_small_x16(_mm512_fmadd_ps(load(r, j), s2, neg_m));
            sum = _mm512_add_ps(sum, e);
            let h: __m256i = std::mem::transmute(_mm512_cvtneps_pbh(e));
            _mm256_storeu_si256(out.add(16 * j).cast(), h);
        }
        // the rest of the row's whole panels: the AMX kernel reads them
        for j in vecs..np / 16 {
            _mm256_storeu_si256(out.add(16 * j).cast(), _mm256_setzero_si256());
        }
        *inv = 1.0 / _mm512_reduce_add_ps(sum);
    }
    inv
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::kernels::bf16::from_bf16;

    fn round(x: f32) -> f64 {
        from_bf16(to_bf16(x)) as f64
    }

    /// The kernels this process can run: AVX512-BF16, and AMX where usable (a skip, said,
    /// where the CPU lacks it).
    fn kernels() -> impl Iterator<Item = bool> + Clone {
        let amx = super::super::amx::usable();
        if !amx {
            crate::runtime::skipped(
                "the bf16 attention on AMX tiles",
                "amx",
                "this CPU has no AMX-BF16 (or Linux refused the tile state)",
            );
        }
        [false, true].into_iter().filter(move |&t| !t || amx)
    }

    /// Against attention over the bf16-rounded q, k and v in f64: the context within the
    /// probabilities' own rounding (each within 2^-8 of itself, so the context within 2^-8
    /// sum p|v| / sum p) plus f32 rounding; head widths 32 and 64, lengths around the tiles' and
    /// panels' edges, inside a qkv buffer with other heads' columns between the rows; values in
    /// [-2, 2], and in [-8, 8] where most probabilities fall below 2^-125 (written as 0). The
    /// scratch starts as NaN: nothing read may be left from before.
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
        for (&d, amp, amx) in [32, 64]
            .iter()
            .flat_map(|d| [(d, 2.0), (d, 8.0)])
            .flat_map(|(d, amp)| kernels().map(move |amx| (d, amp, amx)))
        {
            for &n in &[1, 2, 11, 12, 13, 16, 17, 31, 32, 33, 40, 131] {
                let ld = 3 * d + 8;
                let qkv: Vec<f32> = crate::model::kernels::test_data(n * ld + 2 * d, n as u32)
                    .into_iter()
                    .map(|x| amp * x)
                    .collect();
                let (q, k, v) = (&qkv[..], &qkv[d..], &qkv[2 * d..]);
                let scale = 1.0 / (d as f32).sqrt();
                let mut scratch = vec![f32::NAN; scratch_len(n, d)];
                let mut ctx = vec![f32::NAN; n * d];
                let x = HeadIn {
                    q,
                    k,
                    v,
                    ld,
                    n,
                    d,
                    scale,
                };
                head_forward_on(x, &mut scratch, &mut ctx, amx);
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
                    for c in 0..d {
                        let vj = |j: usize| round(v[j * ld + c]);
                        let want: f64 = (0..n).map(|j| p[j] * vj(j)).sum::<f64>() / z;
                        let spread: f64 = (0..n).map(|j| p[j] * vj(j).abs()).sum::<f64>() / z;
                        let got = ctx[i * d + c] as f64;
                        assert!(
                            (got - want).abs() <= spread / 256.0 + 1e-5,
                            "n {n} d {d} amp {amp} amx {amx} ({i}, {c}): {got} vs {want}"
                        );
                    }
                }
            }
        }
    }

    /// A NaN key makes every row's context NaN, as in f32: no score is dropped as a number.
    #[test]
    fn a_nan_key_makes_every_row_nan() {
        if !super::super::supported() {
            crate::runtime::skipped(
                "the bf16 attention kernel's NaN test",
                "avx512bf16",
                "this CPU has no AVX512-BF16 (the kernel's instruction)",
            );
            return;
        }
        let (n, d) = (40, 32);
        let ld = 3 * d;
        let mut qkv = crate::model::kernels::test_data(n * ld, 5);
        qkv[17 * ld + d + 3] = f32::NAN; // key 17, dim 3
        let (q, k, v) = (&qkv[..], &qkv[d..], &qkv[2 * d..]);
        let mut scratch = vec![0f32; scratch_len(n, d)];
        let mut ctx = vec![0f32; n * d];
        let scale = 1.0 / (d as f32).sqrt();
        let x = HeadIn {
            q,
            k,
            v,
            ld,
            n,
            d,
            scale,
        };
        for amx in kernels() {
            head_forward_on(x, &mut scratch, &mut ctx, amx);
            assert!(ctx.iter().all(|c| c.is_nan()), "amx {amx}");
        }
    }
}
