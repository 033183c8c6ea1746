//! Dropout masks hashed from (seed, row, column) instead of drawn from a stream: the same
//! position always gets the same decision, so backward regenerates a mask instead of storing it
//! (attention's is batch x heads x L x L), and threads or GradCache's replays draw alike. A row is
//! named by a 64-bit identity its caller derives from what it is (an example, a token, a head:
//! `row_id`), never from where it sits in a batch, so that splitting a batch across threads or
//! mini-batches draws the same masks; the element's hash takes all 64 bits of the row's key (a
//! 32-bit key let rows share a mask: 64 x 256 tokens x 12 heads draws ~4.5 such pairs a site).
use crate::dispatch;
use crate::hash::mix64;

/// A dropout site's mask: element (row, col) is kept when a hash of (site seed, row, col) falls
/// below `keep * 2^32`, and kept values are scaled by 1 / keep.
#[derive(Clone, Copy, Debug)]
pub struct Mask {
    seed: u64,
    below: u32,
    scale: f32,
}

/// The identity of token `pos` of the item named `key` (an example, or an example's column).
#[inline]
pub fn row_id(key: u64, pos: usize) -> u64 {
    mix64(mix64(key) ^ pos as u64)
}

/// The identity of attention head `head`'s row of the token named `row`.
#[inline]
pub fn head_row_id(row: u64, head: usize) -> u64 {
    mix64(row ^ (head as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

impl Mask {
    /// None when nothing is dropped (p = 0).
    pub fn new(seed: u64, p: f32) -> Option<Mask> {
        if p <= 0.0 {
            return None;
        }
        let keep = 1.0 - p as f64;
        Some(Mask {
            seed,
            below: (keep * 4_294_967_296.0).min(u32::MAX as f64) as u32,
            scale: (1.0 / keep) as f32,
        })
    }

    /// The seed, the keep threshold and the kept values' scale (the GPU kernels' copy of the
    /// mask: engine/gpu/kernels/).
    pub fn parts(&self) -> (u64, u32, f32) {
        (self.seed, self.below, self.scale)
    }

    /// The row's 64-bit key at this site, from its identity (done once a row).
    #[inline(always)]
    pub fn row_key(&self, row: u64) -> u64 {
        mix64(self.seed ^ row)
    }

    /// The multiplier of column `col` in the row with key `key`: 0 or 1 / keep. Two
    /// multiply-xorshift steps, the key's low half before the first and its high half before the
    /// second, so that both halves decide, at the cost of one murmur3 finaliser (32-bit
    /// multiplies: vectorised on every CPU class).
    #[inline(always)]
    pub fn factor(&self, key: u64, col: u32) -> f32 {
        let mut h = (key as u32 ^ col.wrapping_mul(0x9e37_79b9)).wrapping_mul(0x85eb_ca6b);
        h ^= h >> 15;
        h = (h ^ (key >> 32) as u32).wrapping_mul(0xc2b2_ae35);
        h ^= h >> 13;
        if h < self.below {
            self.scale
        } else {
            0.0
        }
    }

    /// The multipliers of `width` columns for each row identity in `rows`, row after row: the
    /// mask of a small tensor in candle's graph (a head's input) drawn as the engine draws.
    pub fn rows(&self, rows: &[u64], width: usize) -> Vec<f32> {
        let mut out = vec![1f32; rows.len() * width];
        for (&r, row) in rows.iter().zip(out.chunks_exact_mut(width.max(1))) {
            dropout_row(self, r, row);
        }
        out
    }
}

dispatch! {
    /// `x[j] *=` the mask factor of (row, j), for a row of x.
    pub fn dropout_row(mask: &Mask, row: u64, x: &mut [f32]) {
        let key = mask.row_key(row);
        for (j, v) in x.iter_mut().enumerate() {
            *v *= mask.factor(key, j as u32);
        }
    }
}

dispatch! {
    /// One dropout mask applied to two rows at once (backward: the probabilities P and the
    /// gradient dPd of the dropped ones), drawn as `dropout_row` draws it.
    pub fn dropout_rows2(mask: &Mask, row: u64, a: &mut [f32], b: &mut [f32]) {
        let key = mask.row_key(row);
        for (j, (x, y)) in a.iter_mut().zip(b.iter_mut()).enumerate() {
            let f = mask.factor(key, j as u32);
            *x *= f;
            *y *= f;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The dropout mask keeps about 1 - p, scales kept values by 1 / (1 - p), and is the same
    /// for the same (seed, row, column) and different for another seed.
    #[test]
    fn dropout_masks_are_seeded_and_unbiased() {
        let m = Mask::new(7, 0.1).unwrap();
        let mut ones = vec![1f32; 100_000];
        dropout_row(&m, 5, &mut ones);
        let kept = ones.iter().filter(|&&v| v > 0.0).count() as f64 / 1e5;
        assert!((kept - 0.9).abs() < 0.005, "kept {kept}");
        assert!(ones
            .iter()
            .all(|&v| v == 0.0 || (v - 1.0 / 0.9).abs() < 1e-6));
        let mut again = vec![1f32; 100_000];
        dropout_row(&m, 5, &mut again);
        assert_eq!(ones, again);
        let mut other = vec![1f32; 100_000];
        dropout_row(&Mask::new(8, 0.1).unwrap(), 5, &mut other);
        assert_ne!(ones, other);
        assert!(Mask::new(7, 0.0).is_none());
    }

    /// Masks are independent across rows: none of the rows a site draws for 64 items x 256
    /// tokens x 12 heads shares its 256 columns' mask with another (with 32-bit row keys about
    /// 4.5 pairs did), and neighbouring rows keep a column together as often as independent
    /// draws would (keep^2 = 0.81).
    #[test]
    fn masks_are_independent_across_rows() {
        let m = Mask::new(3, 0.1).unwrap();
        let mut seen = std::collections::HashSet::new();
        let (mut both, mut pairs) = (0u64, 0u64);
        let mut prev: Vec<f32> = Vec::new();
        for item in 0..64u64 {
            for pos in 0..256 {
                let r = row_id(item, pos);
                for head in 0..12 {
                    let mut row = vec![1f32; 256];
                    dropout_row(&m, head_row_id(r, head), &mut row);
                    let mut bits = [0u64; 4];
                    for (j, v) in row.iter().enumerate() {
                        bits[j / 64] |= ((*v > 0.0) as u64) << (j % 64);
                    }
                    assert!(
                        seen.insert(bits),
                        "item {item} token {pos} head {head}: a repeat"
                    );
                    if !prev.is_empty() {
                        both += row
                            .iter()
                            .zip(&prev)
                            .filter(|(a, b)| **a > 0.0 && **b > 0.0)
                            .count() as u64;
                        pairs += 256;
                    }
                    prev = row;
                }
            }
        }
        let rate = both as f64 / pairs as f64;
        assert!((rate - 0.81).abs() < 0.002, "kept together {rate}");
    }
}
