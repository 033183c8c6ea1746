use crate::hash::FastSet;
use rayon::prelude::*;

/// The exact n-gram set of one dataset.
#[derive(Default)]
pub struct NgramSet(pub FastSet<u128>);

impl NgramSet {
    pub fn extend(&mut self, keys: Vec<u128>) {
        self.0.extend(keys);
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// |A ∩ B|, walking the smaller set.
    pub fn shared(&self, other: &NgramSet) -> usize {
        let (small, large) = if self.len() <= other.len() {
            (self, other)
        } else {
            (other, self)
        };
        small.0.iter().filter(|k| large.0.contains(k)).count()
    }
}

/// Pairwise shared counts of every pair of sets (symmetric, diagonal = sizes).
pub fn shared_matrix(sets: &[NgramSet]) -> Vec<Vec<u64>> {
    let n = sets.len();
    let pairs: Vec<(usize, usize)> = (0..n).flat_map(|i| (i..n).map(move |j| (i, j))).collect();
    let counts: Vec<u64> = pairs
        .par_iter()
        .map(|&(i, j)| {
            if i == j {
                sets[i].len() as u64
            } else {
                sets[i].shared(&sets[j]) as u64
            }
        })
        .collect();
    let mut m = vec![vec![0u64; n]; n];
    for (&(i, j), c) in pairs.iter().zip(counts) {
        m[i][j] = c;
        m[j][i] = c;
    }
    m
}
