//! How far a rank correlation over a handful of points can be trusted: Spearman's rho with a 95%
//! interval from Fisher's z (variance 1.06 / (n - 3), Fieller, Hartley and Pearson 1957, the usual
//! approximation for Spearman) and a two-sided permutation p-value (seeded, so a report is
//! reproducible). Both assume independent points; cells of a grid that share a source or a
//! target are not, so the interval is, if anything, too narrow.
use super::metrics::spearman;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde::Serialize;

#[derive(Clone, Debug, Serialize)]
pub struct RankCorrelation {
    pub n: usize,
    pub spearman: f64,
    pub ci95: [f64; 2],
    pub p_permutation: f64,
    pub permutations: usize,
}

pub fn rank_correlation(x: &[f64], y: &[f64], permutations: usize, seed: u64) -> RankCorrelation {
    assert_eq!(x.len(), y.len(), "one y per x");
    let n = x.len();
    let rho = spearman(x, y);
    let ci95 = if n > 3 && rho.is_finite() {
        let z = rho.clamp(-0.999_999, 0.999_999).atanh();
        let half = 1.96 * (1.06 / (n as f64 - 3.0)).sqrt();
        [(z - half).tanh(), (z + half).tanh()]
    } else {
        [-1.0, 1.0]
    };
    if !rho.is_finite() {
        // fewer than two distinct values on an axis: no order to test
        return RankCorrelation {
            n,
            spearman: rho,
            ci95,
            p_permutation: f64::NAN,
            permutations: 0,
        };
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut shuffled = y.to_vec();
    let mut as_extreme = 0usize;
    for _ in 0..permutations {
        shuffled.shuffle(&mut rng);
        if spearman(x, &shuffled).abs() >= rho.abs() - 1e-12 {
            as_extreme += 1;
        }
    }
    RankCorrelation {
        n,
        spearman: rho,
        ci95,
        // the observed order counts as one of the orders (never p = 0 from a finite sample)
        p_permutation: (as_extreme + 1) as f64 / (permutations + 1) as f64,
        permutations,
    }
}
