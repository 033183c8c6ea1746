//! What the bf16 kernel reads: f32 values rounded to bf16 bits (and back), strided f32 views of
//! A and B, and the micro-tile's shape.

/// Rows per micro-tile.
pub const MR: usize = 12;
/// Columns per micro-tile and per packed panel of B.
pub const NR: usize = 32;
/// f32 -> bf16 bits, round to nearest even (NaN stays a quiet NaN), as `vcvtne2ps2bf16` does.
pub fn to_bf16(v: f32) -> u16 {
    let b = v.to_bits();
    if v.is_nan() {
        return ((b >> 16) | 0x40) as u16;
    }
    (b.wrapping_add(0x7fff + ((b >> 16) & 1)) >> 16) as u16
}

/// bf16 bits -> f32 (exact).
pub fn from_bf16(h: u16) -> f32 {
    f32::from_bits((h as u32) << 16)
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
    pub(super) fn at(&self, i: usize, j: usize) -> f32 {
        self.data[i * self.rs + j * self.cs]
    }
}
