//! The bf16 kernel's one packing scheme: a right operand B (k x n) rounded to bf16 as panels of
//! `NR` columns, each `[k-pair][NR]` words, a word the rows 2t and 2t + 1 of one column with the
//! first in the low half (how `vdpbf16ps` pairs them); zeros past k and past n. A Linear's
//! weight (`PackedB`, B = W^T) and the attention kernel's keys (B = K^T) and values (B = V) are
//! packed by these two functions alone, as `f32_gemm::panels` packs for the f32 kernel.
use super::matrix::{to_bf16, NR};
use crate::model::kernels::f32_gemm::{self, NR as C};

// a bf16 panel is whole f32 panels
const _: () = assert!(NR.is_multiple_of(C));

/// Two values as one k-pair word: the first in the low half, as `vdpbf16ps` pairs them.
#[inline(always)]
pub(super) fn word(lo: f32, hi: f32) -> u32 {
    to_bf16(lo) as u32 | (to_bf16(hi) as u32) << 16
}

/// Words a panel of B (k x n) takes: its k-pairs x NR.
pub fn panel_words(k: usize) -> usize {
    k.div_ceil(2) * NR
}

/// f32 scratch `pack_transposed` needs for n rows k wide: W^T in the f32 kernel's panels.
pub fn transposed_scratch(n: usize, k: usize) -> usize {
    n.div_ceil(NR) * NR * k
}

crate::dispatch! {
    /// B = W^T from W's n rows (`ld` apart, k wide) into `out` in panels: `out[p P + t NR + j]` =
    /// `word(W[p NR + j][2t], W[p NR + j][2t + 1])`, P = `panel_words(k)`: W^T first in the f32
    /// kernel's panels (`f32_gemm::pack_transposed`, 8 x 8 register transposes, into `scratch`,
    /// `transposed_scratch(n, k)` floats), whose consecutive rows 2t and 2t + 1 are then paired
    /// into words a vector at a time. The attention kernel's keys, a head at a time, and the
    /// weights, once. (Words written straight down each panel column, one scalar store a word,
    /// ran STSb's bf16 encode 2-4% slower on a Zen 5: its short texts' keys are most of a head.)
    pub fn pack_transposed(
        w: &[f32],
        ld: usize,
        n: usize,
        k: usize,
        scratch: &mut [f32],
        out: &mut [u32],
    ) {
        let (pairs, panel) = (k.div_ceil(2), panel_words(k));
        assert!(
            out.len() >= n.div_ceil(NR) * panel && scratch.len() >= transposed_scratch(n, k),
            "bf16 pack_transposed: out of bounds"
        );
        f32_gemm::pack_transposed(w, ld, n, k, scratch);
        let panels = n.div_ceil(C);
        for (p, dst) in out[..n.div_ceil(NR) * panel].chunks_exact_mut(panel).enumerate() {
            for t in 0..pairs {
                for half in 0..NR / C {
                    let o = &mut dst[t * NR + half * C..][..C];
                    let p16 = p * (NR / C) + half;
                    if p16 >= panels {
                        o.fill(0);
                        continue;
                    }
                    // rows 2t and 2t + 1 of an f32 panel: C columns each (zeros past n)
                    let row = |r: usize| &scratch[p16 * C * k + r * C..][..C];
                    if 2 * t + 1 < k {
                        let (a, b) = (row(2 * t), row(2 * t + 1));
                        for ((o, &x), &y) in o.iter_mut().zip(a).zip(b) {
                            *o = word(x, y);
                        }
                    } else {
                        // an odd k's last value pairs with a zero (it multiplies nothing, but
                        // must be a number)
                        o.iter_mut().zip(row(2 * t)).for_each(|(o, &x)| *o = word(x, 0.0));
                    }
                }
            }
        }
    }
}

crate::dispatch! {
    /// B from its k rows (`ld` apart, n wide) into `out` in panels: `out[c P + t NR + j]` =
    /// `word(B[2t][c NR + j], B[2t + 1][c NR + j])`, P = `panel_words(k)`: two rows read
    /// side by side make a panel's row of words (the attention kernel's values).
    pub fn pack_rows(b: &[f32], ld: usize, k: usize, n: usize, out: &mut [u32]) {
        let panel = panel_words(k);
        assert!(
            out.len() >= n.div_ceil(NR) * panel
                && (k == 0 || (ld >= n && b.len() >= (k - 1) * ld + n)),
            "bf16 pack_rows: out of bounds"
        );
        for (c, dst) in out[..n.div_ceil(NR) * panel].chunks_exact_mut(panel).enumerate() {
            let (j0, cols) = (c * NR, NR.min(n - c * NR));
            for (t, o) in dst.chunks_exact_mut(NR).enumerate() {
                let row = |r: usize| &b[r * ld + j0..][..cols];
                let first = row(2 * t);
                if 2 * t + 1 < k {
                    let second = row(2 * t + 1);
                    for ((o, &x), &y) in o.iter_mut().zip(first).zip(second) {
                        *o = word(x, y);
                    }
                } else {
                    o.iter_mut().zip(first).for_each(|(o, &x)| *o = word(x, 0.0));
                }
                o[cols..].fill(0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::kernels::isa::{detected, Isa};

    /// Both functions, on every class this CPU has, place every rounded element where the kernel
    /// reads it, zeros past k and n, over odd k, partial panels and wide leading dimensions;
    /// `out` starts as all ones bits, so nothing is left unwritten.
    #[test]
    fn both_packings_place_every_rounded_element() {
        for &(k, n) in &[(1, 1), (7, 33), (64, 70), (385, 24), (2, 32)] {
            let ld = k.max(n) + 3;
            let rows = k.max(n);
            let src = crate::model::kernels::test_data(rows * ld, (k * n) as u32);
            let at = |r: usize, c: usize| src[r * ld + c];
            let want = |b: &dyn Fn(usize, usize) -> f32, i: usize| {
                let (p, rest) = (i / panel_words(k), i % panel_words(k));
                let (t, col) = (rest / NR, p * NR + rest % NR);
                let half = |d: usize| if d < k && col < n { b(d, col) } else { 0.0 };
                word(half(2 * t), half(2 * t + 1))
            };
            for isa in [Isa::Baseline, Isa::Avx2, Isa::Avx512] {
                if isa > detected() {
                    crate::runtime::skipped("bf16 packing", isa.name(), "this CPU lacks it");
                    continue;
                }
                let len = n.div_ceil(NR) * panel_words(k);
                // B = W^T: element (d, col) is W[col][d]
                let mut out = vec![u32::MAX; len];
                let mut scratch = vec![f32::NAN; transposed_scratch(n, k)];
                pack_transposed::at(isa, &src, ld, n, k, &mut scratch, &mut out);
                for (i, &g) in out.iter().enumerate() {
                    assert_eq!(g, want(&|d, c| at(c, d), i), "W^T k {k} n {n} word {i}");
                }
                let mut out = vec![u32::MAX; len];
                pack_rows::at(isa, &src, ld, k, n, &mut out);
                for (i, &g) in out.iter().enumerate() {
                    assert_eq!(g, want(&at, i), "B k {k} n {n} word {i} ({})", isa.name());
                }
            }
        }
    }
}
