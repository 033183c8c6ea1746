//! One head of self-attention over one text as one kernel: softmax(q k^T * scale) v and each
//! row's log-sum-exp, made `R` query rows at a time, so a block's scores are computed, turned
//! into probabilities and multiplied into the context while they sit in L1.
//!
//! Why not two BLAS calls and a softmax between them (packed_attention.rs's general route): with a
//! head 32 wide the scores' product has k = 32, and per (text, head) the library zero-fills the n x
//! n scores (beta = 0), packs both operands of each product (the n x n probabilities included) and
//! the softmax takes five passes over the buffer. On Cranfield's 256-token abstracts that made the
//! attention ~19% of the encode for ~8% of its FLOPs (perf, Zen 3, issue 35). Here both products
//! are one register tile (R rows x C columns, 12 AVX2 registers), the keys are transposed once into
//! panels of C keys, the values are read in place, the scale rides in the exponent's fused
//! multiply-add (in base 2: `fastmath::exp2_small`) and the 1 / sum is applied to the R x d context
//! rows instead of the R x n probabilities.
//!
//! Numbers differ from the BLAS route's by summation order and the exp's polynomial
//! (tests/engine.rs and the test below hold both to 1e-5); the result does not depend on the
//! thread count (one call, one text).
use super::fastmath::exp2_small;
use super::isa::{active, Isa};
use super::vector::{max, LANES};
use crate::dispatch;

/// Query rows a block: a tile's accumulator rows.
const R: usize = 6;
/// Output columns a tile, and keys a panel: two AVX2 registers, so R x C is 12 of AVX2's 16
/// registers, with two for a row of the right operand and one for the broadcast left element.
const C: usize = 16;
// a score row padded to whole panels is whole vectors of the row kernels' lanes
const _: () = assert!(C.is_multiple_of(LANES));

/// One text's head: `q`, `k`, `v` start at the text's first row at this head's columns, rows
/// `ld` floats apart (the packed qkv buffer); `n` tokens, `d` wide.
#[derive(Clone, Copy)]
pub struct HeadIn<'a> {
    pub q: &'a [f32],
    pub k: &'a [f32],
    pub v: &'a [f32],
    pub ld: usize,
    pub n: usize,
    pub d: usize,
    pub scale: f32,
}

/// Whether this kernel runs a head `d` wide on this CPU: whole tiles of C columns, on the class
/// it was measured on (AVX2 + FMA: Zen 3, issue 35). AVX-512 keeps the BLAS route until measured
/// there (a C-wide row is one register of that class: the tile would fill half its registers).
pub fn serves(d: usize) -> bool {
    d > 0 && d.is_multiple_of(C) && active() == Isa::Avx2
}

/// Scratch floats `head_forward` needs for `n` tokens `d` wide: the keys' panels, a block's
/// scores and its query rows.
pub fn scratch_len(n: usize, d: usize) -> usize {
    let np = n.div_ceil(C) * C;
    np * d + R * np + R * d
}

/// acc[r][c] = sum over k < kc of a[r * lda + k] * b[k * ldb + c]: R rows of the left operand
/// (one element broadcast at a time) by C columns of the right one's rows.
#[inline(always)]
fn tile(a: &[f32], lda: usize, b: &[f32], ldb: usize, kc: usize) -> [[f32; C]; R] {
    let mut acc = [[0f32; C]; R];
    if kc == 0 {
        return acc;
    }
    assert!((R - 1) * lda + kc <= a.len() && (kc - 1) * ldb + C <= b.len());
    for k in 0..kc {
        // SAFETY: k < kc, so every index is inside the bounds asserted above; a [f32; C] has
        // f32's alignment
        let bk: [f32; C] = unsafe { *(b.as_ptr().add(k * ldb) as *const [f32; C]) };
        for (r, row) in acc.iter_mut().enumerate() {
            // SAFETY: as above
            let x = unsafe { *a.get_unchecked(r * lda + k) };
            for (acc, &y) in row.iter_mut().zip(&bk) {
                *acc = x.mul_add(y, *acc);
            }
        }
    }
    acc
}

/// Ask for every row of the head's q, k and v at once, into L1 (`T0`) for the head about to run
/// or into L2 (`T1`) for the next one (`prefetch_next`). They were written by the qkv product,
/// whose output (tokens x 3 hidden) has left the caches, and a head's part of a row is a cache
/// line or two 3 hidden floats from the next: read as the kernel needs them, each row waited on
/// memory (the keys' transposition, the first reader, was a quarter of this kernel on short
/// texts in a profile, nearly all of it on loads).
#[inline(always)]
fn prefetch_rows<const HINT: i32>(x: &HeadIn<'_>) {
    #[cfg(target_arch = "x86_64")]
    for m in [x.q, x.k, x.v] {
        for i in 0..x.n {
            for c in (0..x.d).step_by(16) {
                if let Some(e) = m.get(i * x.ld + c) {
                    // SAFETY: a prefetch reads nothing a program can see and cannot fault; the
                    // address is inside the slice
                    unsafe { std::arch::x86_64::_mm_prefetch::<HINT>((e as *const f32).cast()) }
                }
            }
        }
    }
}

/// Start bringing the head that runs after this one into L2, so that its rows arrive while this
/// one computes.
pub fn prefetch_next(x: &HeadIn<'_>) {
    #[cfg(target_arch = "x86_64")]
    prefetch_rows::<{ std::arch::x86_64::_MM_HINT_T1 }>(x);
}

dispatch! {
    /// ctx (n x d, packed) = softmax(q k^T * scale) v and `lse[i]` = row i's log-sum-exp of the
    /// scaled scores, as packed_attention's forward keeps it. `scratch` holds at least
    /// `scratch_len(n, d)` floats; d is a multiple of C (`serves`).
    pub fn head_forward(x: HeadIn<'_>, scratch: &mut [f32], ctx: &mut [f32], lse: &mut [f32]) {
        let HeadIn { q, k, v, ld, n, d, scale } = x;
        assert!(d.is_multiple_of(C) && ctx.len() >= n * d && lse.len() >= n);
        let np = n.div_ceil(C) * C;
        let scale2 = scale * std::f32::consts::LOG2_E;
        let (kt, rest) = scratch.split_at_mut(np * d);
        let (s, qb) = rest.split_at_mut(R * np);
        let qb = &mut qb[..R * d];
        #[cfg(target_arch = "x86_64")]
        prefetch_rows::<{ std::arch::x86_64::_MM_HINT_T0 }>(&x);
        // K^T in panels of C keys: panel p holds, column by column, keys pC .. pC + C (zeros
        // past the text's end)
        for (p, panel) in kt.chunks_exact_mut(C * d).enumerate() {
            for j in 0..C {
                let key = p * C + j;
                let row = (key < n).then(|| &k[key * ld..key * ld + d]);
                for dd in 0..d {
                    panel[dd * C + j] = row.map_or(0.0, |r| r[dd]);
                }
            }
        }
        for i0 in (0..n).step_by(R) {
            let rows = R.min(n - i0);
            // the block's query rows, zero rows past the end (their scores are zeros, never
            // softmaxed, and their context is not written)
            for (r, dst) in qb.chunks_exact_mut(d).enumerate() {
                if r < rows {
                    dst.copy_from_slice(&q[(i0 + r) * ld..(i0 + r) * ld + d]);
                } else {
                    dst.fill(0.0);
                }
            }
            for (p, panel) in kt.chunks_exact(C * d).enumerate() {
                let acc = tile(qb, d, panel, C, d);
                for (r, a) in acc.iter().enumerate() {
                    s[r * np + p * C..r * np + (p + 1) * C].copy_from_slice(a);
                }
            }
            // probabilities unnormalised, exp((s - max) scale) = 2^((s - max) scale log2 e), and
            // their sums; the padding keys' scores become -inf (probability 0), so every pass
            // runs over whole vectors
            let mut inv = [0f32; R];
            for r in 0..rows {
                let row = &mut s[r * np..(r + 1) * np];
                row[n..].fill(f32::NEG_INFINITY);
                // scale > 0, so the scaled maximum is the maximum scaled (rounding is monotonic);
                // m2's rounding shifts every exponent of the row alike, which the 1 / sum undoes
                let mx = max(row);
                let m2 = mx * scale2;
                let mut acc = [0f32; LANES];
                for c in row.chunks_exact_mut(LANES) {
                    for (a, e) in acc.iter_mut().zip(c.iter_mut()) {
                        *e = exp2_small(e.mul_add(scale2, -m2));
                        *a += *e;
                    }
                }
                let total: f32 = acc.iter().sum();
                inv[r] = 1.0 / total;
                lse[i0 + r] = m2.mul_add(std::f32::consts::LN_2, total.ln());
            }
            for c0 in (0..d).step_by(C) {
                let acc = tile(s, np, &v[c0..], ld, n);
                for (r, a) in acc.iter().enumerate().take(rows) {
                    let out = &mut ctx[(i0 + r) * d + c0..(i0 + r) * d + c0 + C];
                    for (o, &y) in out.iter_mut().zip(a) {
                        *o = y * inv[r];
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::kernels::isa::detected;

    /// Values in [-2, 2], so that scores spread enough for the softmax to matter.
    fn data(n: usize, seed: u32) -> Vec<f32> {
        crate::model::kernels::test_data(n, seed)
            .into_iter()
            .map(|x| 2.0 * x)
            .collect()
    }

    /// The kernel against the definition in f64, for lengths around the tiles' edges and two
    /// head widths, inside a qkv buffer with other heads' columns between the rows.
    #[test]
    fn head_forward_equals_softmax_qk_v_in_f64() {
        if detected() < Isa::Avx2 {
            eprintln!("skipped: this CPU has no AVX2 + FMA (the class the kernel serves)");
            return;
        }
        for &d in &[16, 32, 64] {
            for &n in &[1, 5, 6, 7, 16, 17, 40, 131] {
                let ld = 3 * d + 8;
                let qkv = data(n * ld + 2 * d, (n * d) as u32);
                let (q, k, v) = (&qkv[..], &qkv[d..], &qkv[2 * d..]);
                let scale = 1.0 / (d as f32).sqrt();
                let mut scratch = vec![f32::NAN; scratch_len(n, d)];
                let (mut ctx, mut lse) = (vec![0f32; n * d], vec![0f32; n]);
                let x = HeadIn {
                    q,
                    k,
                    v,
                    ld,
                    n,
                    d,
                    scale,
                };
                head_forward::at(Isa::Avx2, x, &mut scratch, &mut ctx, &mut lse);
                for i in 0..n {
                    let s: Vec<f64> = (0..n)
                        .map(|j| {
                            (0..d)
                                .map(|c| q[i * ld + c] as f64 * k[j * ld + c] as f64)
                                .sum::<f64>()
                                * scale as f64
                        })
                        .collect();
                    let m = s.iter().cloned().fold(f64::MIN, f64::max);
                    let z: f64 = s.iter().map(|x| (x - m).exp()).sum();
                    let want_lse = m + z.ln();
                    assert!(
                        (lse[i] as f64 - want_lse).abs() < 1e-5,
                        "n {n} d {d} row {i}"
                    );
                    for c in 0..d {
                        let want: f64 = (0..n)
                            .map(|j| (s[j] - m).exp() / z * v[j * ld + c] as f64)
                            .sum();
                        let got = ctx[i * d + c] as f64;
                        assert!(
                            (got - want).abs() < 1e-5,
                            "n {n} d {d} ({i}, {c}): {got} vs {want}"
                        );
                    }
                }
            }
        }
    }
}
