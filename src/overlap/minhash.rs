//! k-mins MinHash: one register per permutation, each the minimum over the set of a hash
//! h_i(x) = a_i * mix(x) + b_i (mod 2^64). Memory is k words per dataset whatever its size, and
//! registers merge by elementwise min, so chunks sketch in parallel. The Jaccard estimate is the
//! fraction of equal registers, standard error sqrt(J(1-J)/k).
use crate::hash::mix64;

pub struct MinHasher {
    a: Vec<u64>,
    b: Vec<u64>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Sketch(pub Vec<u64>);

impl MinHasher {
    pub fn new(num_perm: usize, seed: u64) -> MinHasher {
        let mut state = seed;
        let mut next = || {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            mix64(state)
        };
        let a = (0..num_perm).map(|_| next() | 1).collect();
        let b = (0..num_perm).map(|_| next()).collect();
        MinHasher { a, b }
    }

    pub fn num_perm(&self) -> usize {
        self.a.len()
    }

    pub fn empty(&self) -> Sketch {
        Sketch(vec![u64::MAX; self.a.len()])
    }

    pub fn update(&self, sketch: &mut Sketch, keys: &[u128]) {
        for &k in keys {
            let x = mix64((k as u64) ^ mix64((k >> 64) as u64 ^ 0x5851_f42d_4c95_7f2d));
            // a plain zip loop so the compiler vectorizes it (one multiply-add and min per lane)
            for ((m, &a), &b) in sketch.0.iter_mut().zip(&self.a).zip(&self.b) {
                *m = (*m).min(a.wrapping_mul(x).wrapping_add(b));
            }
        }
    }
}

impl Sketch {
    pub fn merge(&mut self, other: &Sketch) {
        for (m, &o) in self.0.iter_mut().zip(&other.0) {
            *m = (*m).min(o);
        }
    }

    pub fn jaccard(&self, other: &Sketch) -> f64 {
        let eq = self
            .0
            .iter()
            .zip(&other.0)
            .filter(|(a, b)| a == b && **a != u64::MAX)
            .count();
        eq as f64 / self.0.len() as f64
    }

    /// Distinct-count estimate: each register's minimum of n uniform draws has mean 1/(n+1);
    /// (k-1)/sum is the unbiased estimator of n for exponential minima.
    pub fn cardinality(&self) -> f64 {
        let k = self.0.len() as f64;
        let sum: f64 = self
            .0
            .iter()
            .map(|&m| (m as f64 + 1.0) / 18_446_744_073_709_551_616.0)
            .sum();
        if self.0.iter().all(|&m| m == u64::MAX) {
            0.0
        } else {
            ((k - 1.0) / sum).max(1.0)
        }
    }
}

/// Standard error of a k-mins MinHash Jaccard estimate.
pub fn standard_error(j: f64, k: usize) -> f64 {
    (j * (1.0 - j) / k as f64).sqrt()
}
