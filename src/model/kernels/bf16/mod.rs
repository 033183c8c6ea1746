//! bf16 matrix products with f32 accumulation on CPUs with AVX512-BF16 (Intel Cooper Lake and
//! Sapphire Rapids on, AMD Zen 4 on): operands are rounded to bf16 (round to nearest even), each
//! pair of products is summed into f32 by `vdpbf16ps`, and C comes out in f32. Twice the
//! multiply-adds per instruction of f32 FMA: measured ~2x OpenBLAS's sgemm on BERT's shapes
//! (benches/README.md). On Intel CPUs with AMX the strips run on AMX tiles instead (`amx`,
//! 16 x 16 x 32 multiply-adds an instruction); CONDENSER_BF16 chooses (`super::precision`).
//!
//! The B operand (a Linear's weight) is packed once into [`PackedB`], on cache lines; A
//! (activations) is converted a row block at a time, into rows of k-pair words that the
//! AVX512-BF16 tile reads where they lie, or into AMX tiles of 1 KiB in one piece.
mod amx;
pub mod attention;
mod kernel;
mod matrix;
mod panels;

pub use amx::register_products as amx_register_products;
pub use matrix::{from_bf16, to_bf16, to_bf16_into, MatRef, MR, NR};

use kernel::{tile_rows, Start, Strip};
use matrix::{halves, Lines};
use panels::{pack_rows, pack_transposed, panel_words, transposed_scratch};
use rayon::prelude::*;

/// The largest k-block in k-pairs: one block for BERT's products up to an intermediate of 1,536
/// (MiniLM's), so C is written once (as in the f32 kernel); a B panel of it (96 KiB) stays in L2
/// beside the A rows it meets. Blocks of 192 pairs read C back 4 times in the intermediate's
/// product.
const KC_MAX: usize = 768;
/// Rows of A a block runs against all of B's panels before the next block (a multiple of MR).
const MC: usize = 96;
const _: () = assert!(MC.is_multiple_of(MR) && MC.is_multiple_of(amx::ROWS));
/// Below this many multiply-adds one thread is faster than splitting.
const PARALLEL_MIN_MACS: usize = 1 << 21;

/// Whether this CPU runs the bf16 kernel (AVX512F + AVX512-BF16).
pub fn supported() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        // the AVX-512 class, not capped by CONDENSER_ISA, with the bf16 pair products
        super::isa::active() == super::isa::Isa::Avx512
            && std::arch::is_x86_feature_detected!("avx512bf16")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// B (k x n) rounded to bf16 in the kernel's layout: panels of NR columns, each `[k-pair][NR]`
/// words (`panels`).
pub struct PackedB {
    /// on cache lines: an AMX tile row that straddles two loads at half the rate
    data: Lines,
    pub k: usize,
    pub n: usize,
    pairs: usize,
}

impl std::fmt::Debug for PackedB {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PackedB({} x {} bf16)", self.k, self.n)
    }
}

impl PackedB {
    /// Any strided view of B: a transposed row-major matrix (a weight) and a row-major one are
    /// packed from where they lie, a panel a task; other strides are copied into rows first.
    pub fn pack(b: MatRef, k: usize, n: usize) -> PackedB {
        let (pairs, panel) = (k.div_ceil(2), panel_words(k));
        let mut data = Lines::zeroed(n.div_ceil(NR) * panel);
        if k > 0 && n > 0 {
            let rows;
            let (src, ld, transposed) = match (b.rs, b.cs) {
                (1, ld) if ld >= k => (b.data, ld, true),
                (ld, 1) if ld >= n => (b.data, ld, false),
                _ => {
                    rows = (0..k * n).map(|i| b.at(i / n, i % n)).collect::<Vec<_>>();
                    (&rows[..], n, false)
                }
            };
            data.words_mut()[..n.div_ceil(NR) * panel]
                .par_chunks_mut(panel)
                .enumerate()
                .for_each(|(p, out)| {
                    let cols = NR.min(n - p * NR);
                    if transposed {
                        let mut scratch = vec![0f32; transposed_scratch(cols, k)];
                        pack_transposed(&src[p * NR * ld..], ld, cols, k, &mut scratch, out)
                    } else {
                        pack_rows(&src[p * NR..], ld, k, cols, out)
                    }
                });
        }
        PackedB { data, k, n, pairs }
    }

    /// The weight of a Linear, W (n x k, row-major), as B = W^T.
    pub fn weight(w: &[f32], n: usize, k: usize) -> PackedB {
        PackedB::pack(MatRef::transposed(w, k), k, n)
    }
}

/// A raw output pointer shared by tasks that write disjoint tiles.
#[derive(Clone, Copy)]
struct Out(*mut f32);
// SAFETY: every task writes its own rows x columns block of C, never another's.
unsafe impl Send for Out {}
unsafe impl Sync for Out {}

/// C (m x n, row stride ldc) = A (m x k) B, or C += A B with `accumulate` (C holding a partial
/// sum). Panics unless the CPU is [`supported`]: callers check first and say so.
pub fn gemm(a: MatRef, m: usize, b: &PackedB, c: &mut [f32], ldc: usize, accumulate: bool) {
    check(&a, m, b, c.len(), ldc);
    run(
        a,
        m,
        b,
        None,
        Out(c.as_mut_ptr()),
        ldc,
        accumulate,
        uses_amx(b),
    );
}

/// C (m x n, row stride ldc) = bias + A B, written without reading C: `c` may be uninitialised
/// (a Linear's output needs no bias fill first). Panics as [`gemm`] does.
pub fn gemm_bias(
    a: MatRef,
    m: usize,
    b: &PackedB,
    bias: &[f32],
    c: &mut [std::mem::MaybeUninit<f32>],
    ldc: usize,
) {
    check(&a, m, b, c.len(), ldc);
    assert_eq!(bias.len(), b.n, "bf16 gemm: a bias of n values");
    let amx = uses_amx(b);
    run(
        a,
        m,
        b,
        Some(bias),
        Out(c.as_mut_ptr().cast()),
        ldc,
        false,
        amx,
    );
}

fn check(a: &MatRef, m: usize, b: &PackedB, c_len: usize, ldc: usize) {
    assert!(
        supported(),
        "bf16 gemm needs AVX512-BF16 (callers check bf16::supported)"
    );
    let (n, k) = (b.n, b.k);
    if m == 0 || n == 0 {
        return;
    }
    assert!(
        ldc >= n && c_len >= (m - 1) * ldc + n,
        "bf16 gemm: C too small"
    );
    assert!(
        a.data.len() > (m - 1) * a.rs + k.saturating_sub(1) * a.cs || k == 0,
        "bf16 gemm: A too small"
    );
}

/// Shapes checked by `check`; `out` holds C's m x n region (row stride ldc); `amx`: the AMX
/// kernel runs the strips (`uses_amx(b)` holds), else the AVX512-BF16 one.
#[allow(clippy::too_many_arguments)]
fn run(
    a: MatRef,
    m: usize,
    b: &PackedB,
    bias: Option<&[f32]>,
    out: Out,
    ldc: usize,
    accumulate: bool,
    amx: bool,
) {
    let n = b.n;
    if m == 0 || n == 0 {
        return;
    }
    let panels = n.div_ceil(NR);
    // rows a thread's share is a multiple of: the micro-kernel's (a share that ends inside a
    // strip computes the rest of it for nothing)
    let unit = if amx { amx::ROWS } else { MR };
    // on the caller's thread alone where it is one of several (`blas::may_split`)
    let threads = if super::blas::may_split() {
        rayon::current_num_threads()
    } else {
        1
    };
    let run = |rows: std::ops::Range<usize>, cols: std::ops::Range<usize>| {
        // SAFETY: CPU support and shapes checked by `check`; tasks get disjoint blocks of C
        unsafe { block(a, rows, b, cols, out, ldc, bias, accumulate, amx) }
    };
    if threads <= 1 || m * n * b.k < PARALLEL_MIN_MACS {
        run(0..m, 0..panels);
    } else if m >= 2 * unit * threads {
        let per = m.div_ceil(threads).div_ceil(unit) * unit;
        (0..m.div_ceil(per))
            .into_par_iter()
            .for_each(|t| run(t * per..((t + 1) * per).min(m), 0..panels));
    } else {
        let per = panels.div_ceil(threads).max(1);
        (0..panels.div_ceil(per))
            .into_par_iter()
            .for_each(|t| run(0..m, t * per..((t + 1) * per).min(panels)));
    }
}

/// Whether bf16 products take AMX tiles where their shapes fit: the process may run them
/// (`amx::usable`) and CONDENSER_BF16=avx512bf16 does not keep the AVX512-BF16 kernel.
pub fn amx_enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let kept_off = crate::settings::get().bf16 == crate::settings::Bf16Setting::Avx512Bf16;
    *ON.get_or_init(|| amx::usable() && !kept_off)
}

/// The micro-kernel strips run on, with its strip height: AMX's (its tile configuration loaded
/// on this thread first; panics where AMX is not usable) or AVX512-BF16's.
fn micro_kernel(amx: bool) -> (usize, Strip) {
    if amx {
        amx::configure();
        (amx::ROWS, amx::strip)
    } else {
        (MR, tile_rows)
    }
}

/// Whether products with `b` take the AMX kernel: it runs here and fits `b`.
fn uses_amx(b: &PackedB) -> bool {
    amx_enabled() && amx_fits(b)
}

/// Whether `b`'s k-pairs, and so every k-block's, are whole AMX tile steps.
fn amx_fits(b: &PackedB) -> bool {
    b.pairs.is_multiple_of(amx::STEP) && kc(b).is_multiple_of(amx::STEP)
}

/// The k-block in k-pairs: `b.pairs` in equal blocks of at most KC_MAX.
fn kc(b: &PackedB) -> usize {
    b.pairs.div_ceil(b.pairs.div_ceil(KC_MAX).max(1)).max(1)
}

thread_local! {
    /// A row block's bf16 words, kept for the thread's next block: MC rows of the widest k met
    /// (MiniLM: 288 KiB), written fresh by every block, so it is never zero-filled again.
    static A_BLOCK: std::cell::Cell<Lines> = const { std::cell::Cell::new(Lines::new()) };
}

/// One task's block of C: rows x panels, all of k. Row blocks of MC, each converted from A where
/// the block runs (its words stay in L2 for every panel; converting all of A first wrote it to
/// memory and read it back): to rows of `b.pairs` k-pair words for the AVX512-BF16 kernel, then
/// k-blocks, panels, strips of MR rows; to AMX tiles for `amx`, then k-blocks, strips of 32
/// rows, panels. The first k-block starts from the bias (or zero, or C with `accumulate`), later
/// ones add to C.
///
/// # Safety
/// AVX512-BF16 present, and with `amx` AMX usable and `amx_fits(b)`; `a` holds the rows given;
/// `out` valid for the rows x panel columns given, written by no one else; a bias holds n
/// values.
#[allow(clippy::too_many_arguments)]
unsafe fn block(
    a: MatRef,
    rows: std::ops::Range<usize>,
    b: &PackedB,
    panels: std::ops::Range<usize>,
    out: Out,
    ldc: usize,
    bias: Option<&[f32]>,
    accumulate: bool,
    amx: bool,
) {
    let lda = b.pairs;
    if b.pairs == 0 {
        // k = 0: the product is zero
        for r in rows {
            for p in panels.clone() {
                let c0 = r * ldc + p * NR;
                for j in 0..NR.min(b.n - p * NR) {
                    let c = out.0.add(c0 + j);
                    *c = bias.map_or(if accumulate { *c } else { 0.0 }, |v| v[p * NR + j]);
                }
            }
        }
        return;
    }
    let kc = kc(b);
    let (unit, strip) = micro_kernel(amx);
    // AMX: tiles of 16 rows a k-step (`amx_fits`: whole steps)
    let steps = b.pairs / amx::STEP;
    let tiles = amx::ATiles::tiles(steps);
    // taken, not borrowed: a nested call on this thread (work stolen while it waits) finds it
    // empty and makes its own
    let mut lines = A_BLOCK.take();
    // rows of `lda` words, or MC / 16 groups of `steps` tiles: as many words
    lines.grow(MC * lda);
    let words = lines.words_mut();
    for i0 in rows.clone().step_by(MC) {
        let i1 = (i0 + MC).min(rows.end);
        let block_halves = halves(&mut words[..MC * lda]);
        if amx {
            a.offset_rows(i0)
                .to_bf16_into_tiles(i1 - i0, b.k, steps, block_halves);
        } else {
            a.offset_rows(i0)
                .to_bf16_into_rows(i1 - i0, b.k, 2 * lda, block_halves);
            if b.k % 2 == 1 {
                // an odd k's last half multiplies B's zero padding, but stale bits may be a NaN
                for r in 0..i1 - i0 {
                    block_halves[r * 2 * lda + b.k] = 0;
                }
            }
        }
        for kb in (0..b.pairs).step_by(kc) {
            let pairs = kc.min(b.pairs - kb);
            // the strip of rows r0.. x panel p
            let strip_at = |r0: usize, p: usize| {
                let start = match bias {
                    _ if kb > 0 || accumulate => Start::C,
                    Some(v) => Start::Bias(v.as_ptr().add(p * NR)),
                    None => Start::Zero,
                };
                let bp = b
                    .data
                    .words()
                    .as_ptr()
                    .add((p * b.pairs + kb) * NR)
                    .cast::<u16>();
                let (rows, ncols) = (unit.min(i1 - r0), NR.min(b.n - p * NR));
                let cp = out.0.add(r0 * ldc + p * NR);
                if amx {
                    // a tile reads whole 16-row groups: MC is a multiple of 32, so they lie
                    // inside `words` (rows past i1 hold an earlier block's words; their sums
                    // are dropped)
                    let t = ((r0 - i0) / 16 * steps + kb / amx::STEP) * amx::TILE;
                    amx::strip_in(
                        rows,
                        pairs,
                        words.as_ptr().add(t),
                        tiles,
                        bp,
                        cp,
                        ldc,
                        ncols,
                        start,
                    );
                } else {
                    let ap = words.as_ptr().add((r0 - i0) * lda + kb);
                    strip(rows, pairs, ap, lda, bp, cp, ldc, ncols, start);
                }
            };
            if amx {
                // a strip's A tiles (24 KiB at BERT's width) stay in L1 while B's panels stream
                // past in order; a panel against every strip's A in turn ran the 1,152 x 384 and
                // 1,536 x 384 products at ~0.6x this order's rate (AMX Xeon, best of 20 rounds)
                for r0 in (i0..i1).step_by(unit) {
                    panels.clone().for_each(|p| strip_at(r0, p));
                }
            } else {
                // a panel of B (stays in L1) against the block's strips of A
                for p in panels.clone() {
                    (i0..i1).step_by(unit).for_each(|r0| strip_at(r0, p));
                }
            }
        }
    }
    A_BLOCK.set(lines);
}

#[cfg(test)]
mod tests;
