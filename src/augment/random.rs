use super::{distinct, PairFilter};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// AugSBERT's random sampling: each distinct sentence1 gets up to `k` partners drawn uniformly
/// from the distinct sentence2 values (of other rows), under the dedup rules. Deterministic for
/// a seed; sentences whose candidates run out get fewer.
pub fn random_pairs<'a>(
    s1: &[&'a str],
    s2: &[&'a str],
    k: usize,
    seed: u64,
) -> Vec<(&'a str, &'a str)> {
    let mut filter = PairFilter::new(s1.iter().copied().zip(s2.iter().copied()));
    let (queries, pool) = (distinct(s1.iter().copied()), distinct(s2.iter().copied()));
    let mut rng = StdRng::seed_from_u64(seed);
    let mut out = Vec::with_capacity(queries.len() * k);
    if pool.is_empty() {
        return out;
    }
    for q in queries {
        let (mut got, mut tries) = (0, 0);
        // bounded tries: a sentence paired with most of the pool cannot loop forever
        while got < k && tries < 20 * k + 20 {
            tries += 1;
            let c = pool[rng.random_range(0..pool.len())];
            if filter.accept(q, c) {
                out.push((q, c));
                got += 1;
            }
        }
    }
    out
}
