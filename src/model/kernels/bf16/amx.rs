//! The AMX micro-kernel (Intel Sapphire Rapids on): `tdpbf16ps` multiplies a 16 x 32 bf16 tile
//! of A by a 32 x 16 tile of B (16 k-pair rows of 16 words, the layout `vdpbf16ps` reads) into
//! a 16 x 16 f32 tile, 8,192 multiply-adds an instruction against `vdpbf16ps`'s 32. B is the
//! AVX512-BF16 kernel's packed panel of NR = 32 columns (`super::panels`), two tiles side by
//! side. A comes two ways (`ATiles`): the GEMM converts its row blocks into tiles of 1 KiB in
//! one piece (`MatRef::to_bf16_into_tiles`); the attention's operands are read where they lie,
//! as rows of k-pair words. A strip is 32 rows x one panel: four C tiles, two A tiles, two B
//! tiles, the eight registers.
//!
//! Linux gives a process the tiles' state only on request (`arch_prctl`), once; each thread
//! loads the tile configuration (`ldtilecfg`) before a run of strips. The instructions are
//! written as inline assembly: Rust's AMX intrinsics are not stable.
#![allow(clippy::missing_safety_doc)]
use super::kernel::{column_masks, Start};
use super::matrix::NR;
use std::arch::asm;
use std::arch::x86_64::*;

/// k-pairs a tile step takes (a tile row of 64 bytes): products run over whole steps, so a
/// k-block must be a multiple of it (BERT's widths are; others take the AVX512-BF16 kernel).
pub const STEP: usize = 16;
/// Rows a strip covers: two A tiles of 16.
pub const ROWS: usize = 32;

/// Whether this process can run AMX tiles: the CPU has AMX-TILE and AMX-BF16 and Linux granted
/// the tile state (asked once; a kernel before 5.16 or a seccomp filter refuses).
pub fn usable() -> bool {
    static GRANTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *GRANTED.get_or_init(|| super::super::isa::has_amx_bf16() && request_tiles())
}

#[cfg(target_os = "linux")]
fn request_tiles() -> bool {
    // arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA): the permission is the process's
    const ARCH_REQ_XCOMP_PERM: libc::c_long = 0x1023;
    const XFEATURE_XTILEDATA: libc::c_long = 18;
    // SAFETY: a system call with two integer arguments; it changes no memory of ours
    unsafe {
        libc::syscall(
            libc::SYS_arch_prctl,
            ARCH_REQ_XCOMP_PERM,
            XFEATURE_XTILEDATA,
        ) == 0
    }
}

#[cfg(not(target_os = "linux"))]
fn request_tiles() -> bool {
    false
}

/// The one tile configuration: palette 1, all eight tiles 16 rows of 64 bytes.
#[repr(C, align(64))]
struct Config([u8; 64]);

const CONFIG: Config = {
    let mut c = [0u8; 64];
    c[0] = 1;
    let mut t = 0;
    while t < 8 {
        c[16 + 2 * t] = 64; // bytes a row (little-endian u16)
        c[48 + t] = 16; // rows
        t += 1;
    }
    Config(c)
};

/// Load the tile configuration on this thread (before its strips; cheap next to a strip).
/// Panics where `usable()` does not hold: a tile instruction there is SIGILL.
#[inline]
pub fn configure() {
    assert!(
        usable(),
        "AMX tiles used where this process may not run them"
    );
    // SAFETY: the CPU has AMX and Linux granted the tile state (`usable`)
    unsafe { asm!("ldtilecfg [{0}]", in(reg) CONFIG.0.as_ptr(), options(nostack, readonly)) };
}

/// `4 x iters` tile products on the registers alone, no loads: what benches time as this core's
/// AMX peak (an encode's strips load a tile a product). Loads the tile configuration; panics
/// where AMX is not usable.
pub fn register_products(iters: usize) {
    configure();
    // SAFETY: configured above; the tiles hold whatever they held (the sums are not read)
    unsafe {
        for _ in 0..iters {
            asm!(
                "tdpbf16ps tmm0, tmm4, tmm6",
                "tdpbf16ps tmm1, tmm4, tmm7",
                "tdpbf16ps tmm2, tmm5, tmm6",
                "tdpbf16ps tmm3, tmm5, tmm7",
                options(nostack, nomem)
            );
        }
    }
}

/// Where a strip's A tiles lie: `row` bytes between a tile's rows, `step` words from one step's
/// tile to the next, `half` words from the strip's first 16 rows' tiles to its second's.
#[derive(Clone, Copy)]
pub struct ATiles {
    row: usize,
    step: usize,
    half: usize,
}

impl ATiles {
    /// A as rows of k-pair words `lda` apart, read where they lie (the attention's operands).
    pub fn rows(lda: usize) -> ATiles {
        ATiles {
            row: lda * 4,
            step: STEP,
            half: 16 * lda,
        }
    }
    /// A in tiles (`MatRef::to_bf16_into_tiles`, `steps` tiles a group of 16 rows): a tile is
    /// 1 KiB in one piece, each row a cache line of its own.
    pub fn tiles(steps: usize) -> ATiles {
        ATiles {
            row: 64,
            step: TILE,
            half: steps * TILE,
        }
    }
}

/// Words an A tile in tiles takes: 16 rows of a step's 16 k-pair words.
pub const TILE: usize = 16 * STEP;

/// `strip_in` over A as rows of k-pair words `lda` apart: the shape of `super::kernel::Strip`.
///
/// # Safety
/// As for [`strip_in`] with `ATiles::rows(lda)`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn strip(
    rows: usize,
    pairs: usize,
    a: *const u32,
    lda: usize,
    b: *const u16,
    c: *mut f32,
    ldc: usize,
    ncols: usize,
    start: Start,
) {
    strip_in(rows, pairs, a, ATiles::rows(lda), b, c, ldc, ncols, start)
}

/// C[rows x ncols] (row stride ldc) = start + A (the strip's first tile at `a`, the rest where
/// `at` says) x one packed B panel, over `pairs` k-pairs (a multiple of STEP), `rows` <= 32,
/// `ncols` <= 32. A tile reads 16 rows whatever `rows` is: A must hold rows up to the next
/// multiple of 16 (their sums are discarded). Columns past `ncols` are neither read from C nor
/// written. A whole strip (32 x 32) starts in the tiles (a bias read as 16 equal rows, a stride
/// of 0) and is stored straight into C; a partial one goes through a buffer, masked.
///
/// # Safety
/// `configure()` ran on this thread; AVX512F; A's tiles hold rows up to `rows` rounded up to 16
/// for `pairs / STEP` steps; `b` a panel of `pairs` rows; `c` every element of rows x ncols.
#[allow(clippy::too_many_arguments)]
pub unsafe fn strip_in(
    rows: usize,
    pairs: usize,
    a: *const u32,
    at: ATiles,
    b: *const u16,
    c: *mut f32,
    ldc: usize,
    ncols: usize,
    start: Start,
) {
    debug_assert!(pairs.is_multiple_of(STEP) && rows <= ROWS && ncols <= NR);
    if rows == ROWS && ncols == NR {
        let from = match start {
            Start::Zero => None,
            Start::C => Some((c as *const f32, ldc * 4)),
            Start::Bias(v) => Some((v, 0)),
        };
        return products::<2, 2>(pairs, a, at, b, from, c, ldc * 4);
    }
    // not read before the tiles are stored into it
    let mut sums = std::mem::MaybeUninit::<Sums>::uninit();
    let out = sums.as_mut_ptr().cast::<f32>();
    match (rows > 16, ncols > 16) {
        (true, true) => products::<2, 2>(pairs, a, at, b, None, out, NR * 4),
        (true, false) => products::<2, 1>(pairs, a, at, b, None, out, NR * 4),
        (false, true) => products::<1, 2>(pairs, a, at, b, None, out, NR * 4),
        (false, false) => products::<1, 1>(pairs, a, at, b, None, out, NR * 4),
    }
    finish(rows, sums.assume_init_ref(), c, ldc, ncols, start);
}

/// A partial strip's sums as the tiles store them: C tile (r, c) at rows 16r.., columns
/// 16c.., rows NR floats apart (only the tiles computed are written).
#[repr(C, align(64))]
struct Sums([f32; ROWS * NR]);

/// The tile products of R x C tiles (R, C in 1..=2) over `pairs`, each C tile starting from
/// zero or from `from` (its (r, c) tile at 16 r rows of `stride` bytes and 16 c floats on), then
/// stored at `out` likewise (`out_stride` bytes a row). Tiles 0-3 are C (tile (r, c) is 2r + c),
/// 4-5 A's two row halves, 6-7 B's two column halves.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn products<const R: usize, const C: usize>(
    pairs: usize,
    a: *const u32,
    at: ATiles,
    b: *const u16,
    from: Option<(*const f32, usize)>,
    out: *mut f32,
    out_stride: usize,
) {
    let (sa, sb) = (at.row, NR * 4);
    let a1 = a.add(at.half);
    match from {
        None => asm!(
            "tilezero tmm0",
            "tilezero tmm1",
            "tilezero tmm2",
            "tilezero tmm3",
            options(nostack, nomem)
        ),
        Some((p, s)) => {
            let lower = p.cast::<u8>().add(16 * s).cast::<f32>();
            asm!(
                "tileloadd tmm0, [{p} + {s}]",
                "tileloadd tmm1, [{p1} + {s}]",
                "tileloadd tmm2, [{q} + {s}]",
                "tileloadd tmm3, [{q1} + {s}]",
                p = in(reg) p, p1 = in(reg) p.add(16), q = in(reg) lower,
                q1 = in(reg) lower.add(16), s = in(reg) s,
                options(nostack, readonly)
            )
        }
    }
    for s in 0..pairs / STEP {
        let (ap, ap1, bp) = (
            a.add(s * at.step),
            a1.add(s * at.step),
            b.add(s * STEP * 2 * NR),
        );
        if R == 2 && C == 2 {
            // the four loads issued together, then the products: a tile load takes ~3x a
            // product's time on the Xeon measured (22 ns against 7.3), and loads interleaved
            // with the products that read them ran the strip at half this order's rate
            asm!(
                "tileloadd tmm4, [{a} + {sa}]",
                "tileloadd tmm5, [{a1} + {sa}]",
                "tileloadd tmm6, [{b} + {sb}]",
                "tileloadd tmm7, [{b1} + {sb}]",
                "tdpbf16ps tmm0, tmm4, tmm6",
                "tdpbf16ps tmm1, tmm4, tmm7",
                "tdpbf16ps tmm2, tmm5, tmm6",
                "tdpbf16ps tmm3, tmm5, tmm7",
                a = in(reg) ap, a1 = in(reg) ap1, b = in(reg) bp,
                b1 = in(reg) bp.add(16 * 2), sa = in(reg) sa, sb = in(reg) sb,
                options(nostack, readonly)
            );
            continue;
        }
        // a partial strip: each block names only the registers it uses
        asm!(
            "tileloadd tmm4, [{a} + {sa}]",
            "tileloadd tmm6, [{b} + {sb}]",
            "tdpbf16ps tmm0, tmm4, tmm6",
            a = in(reg) ap, b = in(reg) bp, sa = in(reg) sa, sb = in(reg) sb,
            options(nostack, readonly)
        );
        if C == 2 {
            asm!(
                "tileloadd tmm7, [{b} + {sb}]",
                "tdpbf16ps tmm1, tmm4, tmm7",
                b = in(reg) bp.add(16 * 2), sb = in(reg) sb,
                options(nostack, readonly)
            );
        }
        if R == 2 {
            asm!(
                "tileloadd tmm5, [{a} + {sa}]",
                "tdpbf16ps tmm2, tmm5, tmm6",
                a = in(reg) ap1, sa = in(reg) sa,
                options(nostack, readonly)
            );
            if C == 2 {
                asm!("tdpbf16ps tmm3, tmm5, tmm7", options(nostack, nomem));
            }
        }
    }
    let so = out_stride;
    asm!("tilestored [{c} + {s}], tmm0", c = in(reg) out, s = in(reg) so, options(nostack));
    if C == 2 {
        asm!("tilestored [{c} + {s}], tmm1", c = in(reg) out.add(16), s = in(reg) so, options(nostack));
    }
    if R == 2 {
        let lower = out.cast::<u8>().add(16 * so).cast::<f32>();
        asm!("tilestored [{c} + {s}], tmm2", c = in(reg) lower, s = in(reg) so, options(nostack));
        if C == 2 {
            asm!("tilestored [{c} + {s}], tmm3", c = in(reg) lower.add(16), s = in(reg) so, options(nostack));
        }
    }
}

/// C's rows = start + the strip's sums, masked to `ncols`.
#[target_feature(enable = "avx512f")]
unsafe fn finish(rows: usize, sums: &Sums, c: *mut f32, ldc: usize, ncols: usize, start: Start) {
    let [m0, m1] = column_masks(ncols);
    for i in 0..rows {
        let (s, cp) = (sums.0.as_ptr().add(i * NR), c.add(i * ldc));
        let (mut v0, mut v1) = (_mm512_load_ps(s), _mm512_load_ps(s.add(16)));
        let base = match start {
            Start::Zero => None,
            Start::C => Some(cp as *const f32),
            Start::Bias(b) => Some(b),
        };
        if let Some(p) = base {
            v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, p));
            v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, p.add(16)));
        }
        _mm512_mask_storeu_ps(cp, m0, v0);
        _mm512_mask_storeu_ps(cp.add(16), m1, v1);
    }
}
