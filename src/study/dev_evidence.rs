//! What a dev gain rests on beside its mean (issue 82). Per-query gains are heavy-tailed: on an
//! unseen collection the two halves of one method's queries gave +0.057 and -0.026, 2.6 standard
//! errors apart, and a mean over 26-112 queries with a normal standard error looked safer than it
//! was. So each dev row also keeps the queries won and lost, the median, the gain on each fold of
//! the train queries, and a bootstrap over queries: the lower 5% bound of the mean gain. The rules
//! of `condenser loco` may ask for either kind of evidence (loco.rs, `Evidence`).
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

/// Resamples of the bootstrap: its 5% bound moves by well under 0.001 ndcg@10 from one seed to
/// another at this count on the development collections' 14-112 dev queries.
const RESAMPLES: usize = 4000;

/// The bootstrap's fixed seed: a dev table, and the rule applied to it, are the same every run.
const SEED: u64 = 82;

/// One method's per-query dev gains, summarised.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct QueryEvidence {
    /// Dev queries whose gain is above zero, and below.
    pub won: usize,
    pub lost: usize,
    pub median: Option<f64>,
    /// (fold, mean gain over that fold's queries), in fold order: where the train queries were
    /// cut into folds (dev sets `<name>-f<k>`).
    pub folds: Vec<(String, f64)>,
    /// The lower 5% bound of the mean gain over a bootstrap of the queries (None below 2).
    pub bootstrap_low: Option<f64>,
}

impl QueryEvidence {
    /// The evidence of per-query gains, each with the fold its query belongs to (None where it
    /// is in no fold's dev set).
    pub fn of(gains: &[(Option<String>, f64)]) -> QueryEvidence {
        let g: Vec<f64> = gains.iter().map(|x| x.1).collect();
        let mut folds: Vec<(String, f64, usize)> = Vec::new();
        for (fold, v) in gains {
            let Some(f) = fold else { continue };
            match folds.iter_mut().find(|x| &x.0 == f) {
                Some(x) => (x.1, x.2) = (x.1 + v, x.2 + 1),
                None => folds.push((f.clone(), *v, 1)),
            }
        }
        folds.sort_by_key(|f| f.0.parse::<u64>().unwrap_or(u64::MAX));
        QueryEvidence {
            won: g.iter().filter(|v| **v > 0.0).count(),
            lost: g.iter().filter(|v| **v < 0.0).count(),
            median: median(&g),
            folds: folds
                .into_iter()
                .map(|(f, s, n)| (f, s / n as f64))
                .collect(),
            bootstrap_low: bootstrap_low(&g),
        }
    }

    /// Whether every fold's gain is above zero (false without two folds or more: nothing to
    /// hold across).
    pub fn every_fold_ahead(&self) -> bool {
        self.folds.len() >= 2 && self.folds.iter().all(|f| f.1 > 0.0)
    }
}

/// The median of `v` (None when empty).
pub fn median(v: &[f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    Some(if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    })
}

/// The lower 5% bound of the mean of `v` over RESAMPLES bootstrap resamples (percentile method),
/// None below two values.
pub fn bootstrap_low(v: &[f64]) -> Option<f64> {
    if v.len() < 2 {
        return None;
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(SEED);
    let n = v.len();
    let mut means: Vec<f64> = (0..RESAMPLES)
        .map(|_| (0..n).map(|_| v[rng.random_range(0..n)]).sum::<f64>() / n as f64)
        .collect();
    means.sort_by(f64::total_cmp);
    Some(means[RESAMPLES / 20])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_folds_and_the_bootstrap_bound() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        let f = |k: &str| Some(k.to_string());
        let e = QueryEvidence::of(&[
            (f("2"), 0.1),
            (f("1"), 0.3),
            (f("1"), -0.1),
            (f("10"), 0.2),
            (None, 0.0),
        ]);
        assert_eq!((e.won, e.lost), (3, 1));
        let folds: Vec<_> = e.folds.iter().map(|x| x.0.as_str()).collect();
        assert_eq!(folds, ["1", "2", "10"], "in fold order, not text order");
        assert!((e.folds[0].1 - 0.1).abs() < 1e-12);
        assert!(e.every_fold_ahead());
        // one fold behind, or a single fold, holds nothing across folds
        assert!(!QueryEvidence::of(&[(f("1"), 0.3), (f("2"), -0.01)]).every_fold_ahead());
        assert!(!QueryEvidence::of(&[(f("1"), 0.3), (f("1"), 0.2)]).every_fold_ahead());
        // a mean carried by one query: positive, but its bootstrap bound is not
        let mut tail = vec![-0.01; 19];
        tail.push(0.5);
        let mean = tail.iter().sum::<f64>() / 20.0;
        let low = bootstrap_low(&tail).unwrap();
        assert!(mean > 0.0 && low < 0.0, "mean {mean}, low {low}");
        // steady gains: the bound clears zero, below the mean, and the same every call
        let steady: Vec<f64> = (0..30).map(|i| 0.02 + 0.001 * (i % 5) as f64).collect();
        let low = bootstrap_low(&steady).unwrap();
        assert!(low > 0.0 && low < 0.022, "{low}");
        assert_eq!(bootstrap_low(&steady), Some(low));
        assert_eq!(bootstrap_low(&[0.1]), None);
    }
}
