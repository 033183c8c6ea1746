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
//! panels of C keys (8 x 8 register transposes), the values copied once into contiguous C-column
//! chunks (read in place, each step's row was a new cache line 3 hidden floats on), a whole
//! block's queries read in place, the block's softmax is `softmax::softmax_block` (the scale
//! riding in the base-2 exponent's fused multiply-add) and the 1 / sum is applied to the R x d
//! context rows instead of the R x n probabilities.
//!
//! Numbers differ from the BLAS route's by summation order
//! (tests/engine.rs and the test below hold both to 1e-5); the result does not depend on the
//! thread count (one call, one text).
use super::isa::{active, own_f32_kernels, Isa};
use super::softmax::softmax_block;
use super::vector::LANES;
use crate::dispatch;

/// Query rows a block: a tile's accumulator rows.
const R: usize = 6;
/// Output columns a tile, and keys a panel (`pack_keys`): two AVX2 registers, so R x C is 12 of
/// AVX2's 16 registers, with two for a row of the right operand and one for the broadcast left
/// element.
pub(crate) const C: usize = 16;
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

/// Whether this kernel runs a head `d` wide on this CPU: whole tiles of C columns, where it was
/// measured faster than the BLAS route (`isa::own_f32_kernels`: AVX2 + FMA on Zen 3, AVX-512 on
/// Zen 4, whose AVX-512 copy ran as fast as the AVX2 one; issue 35).
pub fn serves(d: usize) -> bool {
    d > 0 && d.is_multiple_of(C) && active() >= Isa::Avx2 && own_f32_kernels()
}

/// Scratch floats `head_forward` needs for `n` tokens `d` wide: the keys' panels, the values'
/// chunks, a block's scores and its (partial) query rows.
pub fn scratch_len(n: usize, d: usize) -> usize {
    let np = n.div_ceil(C) * C;
    2 * np * d + R * np + R * d
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

/// K^T for one head in panels of C keys (`kt[p C d + dd C + j]` = key pC + j's value dd; zeros
/// past key n). On AVX2 eight keys by eight dims at a time through an 8 x 8 register transpose:
/// element by element this was a tenth of the kernel on 187-token texts (perf, Zen 3, issue 35).
pub(crate) fn pack_keys(k: &[f32], ld: usize, n: usize, d: usize, kt: &mut [f32]) {
    let np = n.div_ceil(C) * C;
    assert!(kt.len() >= np * d && (n == 0 || k.len() >= (n - 1) * ld + d));
    #[cfg(target_arch = "x86_64")]
    if d.is_multiple_of(8) && super::isa::active() >= super::isa::Isa::Avx2 {
        // SAFETY: AVX2 detected; the bounds are asserted above
        return unsafe { pack_keys_avx2(k, ld, n, d, kt) };
    }
    for (p, panel) in kt[..np * d].chunks_exact_mut(C * d).enumerate() {
        for j in 0..C {
            let key = p * C + j;
            let row = (key < n).then(|| &k[key * ld..key * ld + d]);
            for dd in 0..d {
                panel[dd * C + j] = row.map_or(0.0, |r| r[dd]);
            }
        }
    }
}

/// `pack_keys` for d a multiple of 8. Safety: AVX2 present, and the bounds `pack_keys` asserts.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn pack_keys_avx2(k: &[f32], ld: usize, n: usize, d: usize, kt: &mut [f32]) {
    use std::arch::x86_64::*;
    let (kp, tp) = (k.as_ptr(), kt.as_mut_ptr());
    for j0 in (0..n.div_ceil(C) * C).step_by(8) {
        let (p, jj) = (j0 / C, j0 % C);
        for dd0 in (0..d).step_by(8) {
            let row = |i: usize| {
                if j0 + i < n {
                    _mm256_loadu_ps(kp.add((j0 + i) * ld + dd0))
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
            // column i of the 8 x 8 block: dim dd0 + i of the eight keys
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
                _mm256_storeu_ps(tp.add(p * C * d + (dd0 + i) * C + jj), c);
            }
        }
    }
}

/// Ask for the head's rows into L1 before it runs (see `prefetch_rows`).
#[inline(always)]
pub(crate) fn prefetch_now(x: &HeadIn<'_>) {
    #[cfg(target_arch = "x86_64")]
    prefetch_rows::<{ std::arch::x86_64::_MM_HINT_T0 }>(x);
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
        let (vp, rest) = rest.split_at_mut(np * d);
        let (s, qb) = rest.split_at_mut(R * np);
        let qb = &mut qb[..R * d];
        prefetch_now(&x);
        // K^T in panels of C keys: panel p holds, column by column, keys pC .. pC + C (zeros
        // past the text's end)
        pack_keys(k, ld, n, d, kt);
        // V in chunks of C columns, each chunk's n rows contiguous
        for (ci, chunk) in vp.chunks_exact_mut(np * C).enumerate() {
            for key in 0..n {
                chunk[key * C..(key + 1) * C].copy_from_slice(&v[key * ld + ci * C..][..C]);
            }
        }
        for i0 in (0..n).step_by(R) {
            let rows = R.min(n - i0);
            // the block's query rows: read in place for a whole block; for the last, partial
            // one copied beside zero rows (their scores are zeros, never softmaxed, and their
            // context is not written)
            let (qa, lda) = if rows == R {
                (&q[i0 * ld..], ld)
            } else {
                for (r, dst) in qb.chunks_exact_mut(d).enumerate() {
                    if r < rows {
                        dst.copy_from_slice(&q[(i0 + r) * ld..(i0 + r) * ld + d]);
                    } else {
                        dst.fill(0.0);
                    }
                }
                (&qb[..], d)
            };
            for (p, panel) in kt.chunks_exact(C * d).enumerate() {
                let acc = tile(qa, lda, panel, C, d);
                for (r, a) in acc.iter().enumerate() {
                    s[r * np + p * C..r * np + (p + 1) * C].copy_from_slice(a);
                }
            }
            let inv = softmax_block::<R>(s, np, n, rows, scale2, &mut lse[i0..]);
            for c0 in (0..d).step_by(C) {
                let acc = tile(s, np, &vp[c0 * np..], C, n);
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

    /// The kernel against the definition in f64, for lengths around the tiles' edges and three
    /// head widths, inside a qkv buffer with other heads' columns between the rows; its AVX-512
    /// copy (Zen 4 runs it) gives the AVX2 copy's bits.
    #[test]
    fn head_forward_equals_softmax_qk_v_in_f64() {
        if detected() < Isa::Avx2 {
            crate::runtime::skipped(
                "the attention kernel's test",
                "avx2",
                "this CPU has no AVX2 + FMA (the class the kernel serves)",
            );
            return;
        }
        if detected() < Isa::Avx512 {
            crate::runtime::skipped(
                "the attention kernel's AVX-512 copy",
                "avx512",
                "this CPU has no AVX-512",
            );
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
                if detected() == Isa::Avx512 {
                    let (mut ctx5, mut lse5) = (vec![0f32; n * d], vec![0f32; n]);
                    head_forward::at(Isa::Avx512, x, &mut scratch, &mut ctx5, &mut lse5);
                    assert!(
                        ctx5 == ctx && lse5 == lse,
                        "n {n} d {d}: AVX-512 copy differs"
                    );
                }
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
