//! Dropout masks hashed from (seed, row, column) instead of drawn from a stream: the same
//! position always gets the same decision, so backward regenerates a mask instead of storing it
//! (attention's is batch x heads x L x L), and threads or GradCache's replays draw alike.
use crate::dispatch;

/// A dropout site's mask: element (row, col) is kept when a hash of (site seed, row, col) falls
/// below `keep * 2^32`, and kept values are scaled by 1 / keep. The same (seed, row, col) always
/// gives the same decision, so backward regenerates the mask from the seed (nothing stored: the
/// attention's is batch x heads x L x L), and threads or replays (GradCache) draw identically.
#[derive(Clone, Copy, Debug)]
pub struct Mask {
    seed: u64,
    below: u32,
    scale: f32,
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

    /// The per-row key the column hash starts from (a 64-bit mix of seed and row, done once a row).
    #[inline(always)]
    pub fn row_key(&self, row: u64) -> u32 {
        let mut z = self.seed ^ row.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) >> 32) as u32
    }

    /// The multiplier of column `col` in the row with key `key`: 0 or 1 / keep.
    #[inline(always)]
    pub fn factor(&self, key: u32, col: u32) -> f32 {
        // murmur3's finaliser of (key ^ col * golden ratio): vectorises (32-bit multiplies)
        let mut h = key ^ col.wrapping_mul(0x9e37_79b9);
        h ^= h >> 16;
        h = h.wrapping_mul(0x85eb_ca6b);
        h ^= h >> 13;
        h = h.wrapping_mul(0xc2b2_ae35);
        h ^= h >> 16;
        if h < self.below {
            self.scale
        } else {
            0.0
        }
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
}
