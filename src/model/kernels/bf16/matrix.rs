//! What the bf16 kernel reads: f32 values rounded to bf16 bits (and back), strided f32 views of
//! A and B, and the micro-tile's shape.

/// Rows per micro-tile.
pub const MR: usize = 12;
/// Columns per micro-tile and per packed panel of B.
pub const NR: usize = 32;
/// f32 -> bf16 bits, round to nearest even (NaN stays a quiet NaN), as `vcvtne2ps2bf16` does.
/// Written as a select, not an early return, so that loops calling it vectorise.
#[inline(always)]
pub fn to_bf16(v: f32) -> u16 {
    let b = v.to_bits();
    let rounded = (b.wrapping_add(0x7fff + ((b >> 16) & 1)) >> 16) as u16;
    if v.is_nan() {
        ((b >> 16) | 0x40) as u16
    } else {
        rounded
    }
}

/// bf16 bits -> f32 (exact).
pub fn from_bf16(h: u16) -> f32 {
    f32::from_bits((h as u32) << 16)
}

crate::dispatch! {
    /// `dst[i] = to_bf16(src[i])`, compiled per CPU class so that it runs as vector code: the
    /// operands of oneMKL's bf16 GEMM are converted on every product.
    pub fn to_bf16_into(src: &[f32], dst: &mut [u16]) {
        for (d, &v) in dst.iter_mut().zip(src) {
            *d = to_bf16(v);
        }
    }
}

crate::dispatch! {
    /// One row as bf16 in pieces of `TILE_ROW` halves, `stride` halves apart (the last piece
    /// zero past the row's end): a row of A into the AMX tiles of its steps.
    pub fn to_bf16_pieces(src: &[f32], stride: usize, dst: &mut [u16]) {
        for (s, piece) in src.chunks(TILE_ROW).enumerate() {
            let d = &mut dst[s * stride..][..TILE_ROW];
            for (d, &v) in d.iter_mut().zip(piece) {
                *d = to_bf16(v);
            }
            d[piece.len()..].fill(0);
        }
    }
}

/// Halves in a row of an AMX tile (64 bytes): 16 k-pairs of one row of A.
pub const TILE_ROW: usize = 32;

/// 4-byte values (words, floats) in a cache line of 64 bytes.
pub(super) const LINE: usize = 16;

/// LINE words on a 64-byte boundary: a cache line, and an AMX tile row (a tile row that
/// straddles two lines loads at half the rate: `tileloadd` 20 ns against 11 on the AMX Xeon
/// measured).
#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct Line([u32; LINE]);

/// Words that start on a cache line (`Vec<u32>` from the allocator starts 16 bytes past one).
#[derive(Default)]
pub(super) struct Lines(Vec<Line>);

impl Lines {
    /// No words (a thread's empty A block).
    pub const fn new() -> Lines {
        Lines(Vec::new())
    }
    /// `words` zero words (rounded up to whole lines).
    pub fn zeroed(words: usize) -> Lines {
        Lines(vec![Line([0; LINE]); words.div_ceil(LINE)])
    }
    /// At least `words` words, keeping what is there.
    pub fn grow(&mut self, words: usize) {
        if self.0.len() * LINE < words {
            self.0.resize(words.div_ceil(LINE), Line([0; LINE]));
        }
    }
    pub fn words(&self) -> &[u32] {
        // SAFETY: lines of LINE u32 are as many u32, of a larger alignment
        unsafe { std::slice::from_raw_parts(self.0.as_ptr().cast(), self.0.len() * LINE) }
    }
    pub fn words_mut(&mut self) -> &mut [u32] {
        // SAFETY: as `words`
        unsafe { std::slice::from_raw_parts_mut(self.0.as_mut_ptr().cast(), self.0.len() * LINE) }
    }
}

/// Words seen as their bf16 halves, two a word (low half first: x86 is little-endian): where A's
/// rows of k-pair words are written (the GEMM's row blocks, the attention's q and probabilities).
pub(super) fn halves(w: &mut [u32]) -> &mut [u16] {
    // SAFETY: the same memory as twice as many u16, of a smaller alignment
    unsafe { std::slice::from_raw_parts_mut(w.as_mut_ptr().cast::<u16>(), 2 * w.len()) }
}

/// A strided f32 matrix view: element (i, j) at `data[i * rs + j * cs]`.
#[derive(Clone, Copy)]
pub struct MatRef<'a> {
    pub data: &'a [f32],
    pub rs: usize,
    pub cs: usize,
}

impl<'a> MatRef<'a> {
    /// Row-major with leading dimension `ld`.
    pub fn rows(data: &'a [f32], ld: usize) -> MatRef<'a> {
        MatRef {
            data,
            rs: ld,
            cs: 1,
        }
    }
    /// The transpose of a row-major matrix with leading dimension `ld`.
    pub fn transposed(data: &'a [f32], ld: usize) -> MatRef<'a> {
        MatRef {
            data,
            rs: 1,
            cs: ld,
        }
    }
    /// The view from row `i` on.
    pub(super) fn offset_rows(&self, i: usize) -> MatRef<'a> {
        MatRef {
            data: &self.data[i * self.rs..],
            ..*self
        }
    }
    pub(super) fn at(&self, i: usize, j: usize) -> f32 {
        self.data[i * self.rs + j * self.cs]
    }

    /// The `rows` x `cols` view as row-major bf16 bits.
    pub fn to_bf16_rows(&self, rows: usize, cols: usize) -> Vec<u16> {
        let mut out = vec![0u16; rows * cols];
        self.to_bf16_into_rows(rows, cols, cols.max(1), &mut out);
        out
    }

    /// The `rows` x `cols` view as bf16 bits into AMX tiles: groups of 16 rows, each `steps` tiles
    /// (`steps` x TILE_ROW >= cols) of 16 rows x TILE_ROW halves, in that order (so a tile is
    /// 1 KiB in one piece, its rows 64 bytes apart); zeros past `cols`. What lies in rows past
    /// `rows` of the last group is left as it is.
    pub fn to_bf16_into_tiles(&self, rows: usize, cols: usize, steps: usize, out: &mut [u16]) {
        assert!(
            steps * TILE_ROW >= cols,
            "bf16 tiles: {steps} steps for {cols} columns"
        );
        let tile = 16 * TILE_ROW;
        for i in 0..rows {
            let o = &mut out[((i / 16) * steps * 16 + i % 16) * TILE_ROW..];
            if self.cs == 1 {
                to_bf16_pieces(&self.data[i * self.rs..i * self.rs + cols], tile, o);
            } else {
                for s in 0..steps {
                    for (j, v) in o[s * tile..][..TILE_ROW].iter_mut().enumerate() {
                        let c = s * TILE_ROW + j;
                        *v = if c < cols { to_bf16(self.at(i, c)) } else { 0 };
                    }
                }
            }
        }
    }

    /// The `rows` x `cols` view as bf16 bits into `out`'s rows, `ld` apart (`ld` >= cols; what
    /// lies past `cols` in each row is left as it is).
    pub fn to_bf16_into_rows(&self, rows: usize, cols: usize, ld: usize, out: &mut [u16]) {
        for (i, o) in out.chunks_mut(ld).take(rows).enumerate() {
            let o = &mut o[..cols];
            if self.cs == 1 {
                to_bf16_into(&self.data[i * self.rs..i * self.rs + cols], o);
            } else {
                for (j, v) in o.iter_mut().enumerate() {
                    *v = to_bf16(self.at(i, j));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::kernels::isa::{detected, Isa};

    #[test]
    fn every_class_converts_rows_as_to_bf16_does() {
        let mut src: Vec<f32> = (0..1000).map(|i| (i as f32 - 500.0) * 0.0137).collect();
        src.extend([
            f32::NAN,
            f32::INFINITY,
            -0.0,
            1.0 + f32::EPSILON * 64.0,
            f32::from_bits(0x3f80_8000),
            f32::MAX,
        ]);
        let want: Vec<u16> = src.iter().map(|&v| to_bf16(v)).collect();
        for isa in [Isa::Baseline, Isa::Avx2, Isa::Avx512] {
            if isa > detected() {
                crate::runtime::skipped("bf16 conversion", isa.name(), "this CPU lacks it");
                continue;
            }
            let mut got = vec![0u16; src.len()];
            to_bf16_into::at(isa, &src, &mut got);
            assert_eq!(got, want, "{}", isa.name());
            // in pieces of a tile row, 2 x TILE_ROW apart, the last piece zero past the end
            let mut pieces = vec![u16::MAX; src.len().div_ceil(TILE_ROW) * 2 * TILE_ROW];
            to_bf16_pieces::at(isa, &src, 2 * TILE_ROW, &mut pieces);
            for (j, &w) in want.iter().enumerate() {
                let at = j / TILE_ROW * 2 * TILE_ROW + j % TILE_ROW;
                assert_eq!(pieces[at], w, "{} piece value {j}", isa.name());
            }
            let tail = src.len() / TILE_ROW * 2 * TILE_ROW + src.len() % TILE_ROW;
            let end = src.len() / TILE_ROW * 2 * TILE_ROW + TILE_ROW;
            assert!(pieces[tail..end].iter().all(|&h| h == 0), "{}", isa.name());
        }
        let m = MatRef::transposed(&src[..12], 3); // 3 x 4 view of a 4 x 3 matrix
        let t = m.to_bf16_rows(3, 4);
        assert_eq!(t[1], to_bf16(src[3]));
        assert_eq!(MatRef::rows(&src[..12], 4).to_bf16_rows(3, 4), want[..12]);
    }
}
