//! One head of self-attention over one text as one kernel: softmax(q k^T * scale) v and each
//! row's log-sum-exp, made `R` query rows at a time, so a block's scores are computed, turned
//! into probabilities and multiplied into the context while they sit in L1.
//!
//! Why not two BLAS calls and a softmax between them (packed_attention.rs's general route): with a
//! head 32 wide the scores' product has k = 32, and per (text, head) the library zero-fills the n x
//! n scores (beta = 0), packs both operands of each product (the n x n probabilities included) and
//! the softmax takes five passes over the buffer. On Cranfield's 256-token abstracts that made the
//! attention ~19% of the encode for ~8% of its FLOPs (perf, Zen 3, issue 35). Here both products
//! run on the f32 GEMM's own register tile and panels (R rows x C columns, 12 AVX2 registers;
//! f32_gemm's one packing scheme): the keys transposed once into panels of C keys (8 x 8 register
//! transposes), the values copied once into panels of C columns (read in place, each step's row
//! was a new cache line 3 hidden floats on), a whole block's queries read in place, the block's
//! softmax is `softmax::softmax_block` (the scale riding in the base-2 exponent's fused
//! multiply-add) and the 1 / sum is applied to the R x d context rows instead of the R x n
//! probabilities.
//!
//! Numbers differ from the BLAS route's by summation order (tests/engine.rs and the test below
//! hold both to 1e-5); the result does not depend on the thread count (one call, one text).
use super::f32_gemm::{self, pack_rows, pack_transposed};
use super::softmax::softmax_block;
use super::vector::LANES;
use crate::dispatch;

/// Query rows a block: the f32 GEMM's tile rows.
const R: usize = f32_gemm::MR;
/// Output columns a tile, and keys a panel: the f32 GEMM's panel width (two AVX2 registers).
pub(crate) const C: usize = f32_gemm::NR;
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

/// Whether this kernel runs a head `d` wide on this CPU: whole tiles of C columns, where it is
/// chosen over the BLAS route (`f32_gemm::attention_chosen`: by default where it was measured
/// faster, `isa::own_f32_attention`: AVX2 + FMA on Zen 3, AVX-512 on Zen 4, whose AVX-512 copy
/// ran as fast as the AVX2 one, issue 35; CONDENSER_F32_GEMM=own|blas sets it with the Linears).
pub fn serves(d: usize) -> bool {
    d > 0 && d.is_multiple_of(C) && f32_gemm::attention_chosen()
}

/// Scratch floats `head_forward` needs for `n` tokens `d` wide: the keys' panels, the values'
/// panels, a block's scores and its (partial) query rows.
pub fn scratch_len(n: usize, d: usize) -> usize {
    let np = n.div_ceil(C) * C;
    2 * np * d + R * np + R * d
}

/// The f32 GEMM's register tile (`f32_gemm::tile`) from zero: C (R x C, stride ldc) = A (R rows
/// of kb, stride lda) B (one panel as `pack_transposed`/`pack_rows` lay it, kb x C).
#[inline(always)]
fn tile(kb: usize, a: &[f32], lda: usize, b: &[f32], c: &mut [f32], ldc: usize) {
    assert!(kb > 0 && (R - 1) * lda + kb <= a.len() && kb * C <= b.len());
    assert!((R - 1) * ldc + C <= c.len() && f32_gemm::supported());
    const ZERO: [f32; C] = [0.0; C];
    // SAFETY: bounds and AVX2 + FMA asserted above
    #[cfg(target_arch = "x86_64")]
    unsafe {
        let (a, b, c) = (a.as_ptr(), b.as_ptr(), c.as_mut_ptr());
        f32_gemm::tile(kb, a, lda, b, c, ldc, Some(ZERO.as_ptr()))
    }
    #[cfg(not(target_arch = "x86_64"))]
    unreachable!("f32_gemm::supported() holds on x86-64 only")
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
        // K^T in panels of C keys (zeros past the text's end); V in panels of C columns
        pack_transposed(k, ld, n, d, kt);
        pack_rows(v, ld, n, d, vp);
        let mut acc = [0f32; R * C];
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
                tile(d, qa, lda, panel, &mut s[p * C..], np);
            }
            let inv = softmax_block::<R, WIDE>(s, np, n, rows, scale2, &mut lse[i0..]);
            for (c, panel) in vp[..n * d].chunks_exact(n * C).enumerate() {
                tile(n, s, np, panel, &mut acc, C);
                for (r, a) in acc.chunks_exact(C).enumerate().take(rows) {
                    let out = &mut ctx[(i0 + r) * d + c * C..(i0 + r) * d + (c + 1) * C];
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
    use crate::model::kernels::isa::{detected, Isa};

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
