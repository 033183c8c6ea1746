//! Spherical k-means for the IVF index's lists (unit vectors, so the nearest centroid is the one
//! of largest dot product): both the assignment and the search's choice of lists are one BLAS
//! GEMM per block of rows against all centroids.
use crate::error::{Error, Result};
use crate::model::kernels::blas::{blas, NO_TRANS, TRANS};
use rand::{rngs::StdRng, SeedableRng};
use rayon::prelude::*;

/// Rows scored against the centroids per GEMM (1,024 x 4,096 lists of scores is 16 MB).
const ROW_BLOCK: usize = 1024;
/// Lloyd iterations of the training (the lists' recall settles by 10 at 1M: benches/README.md).
pub const ITERATIONS: usize = 10;

/// `v` scaled to unit length (a zero vector stays zero).
pub fn unit_rows(v: &[f32], dim: usize) -> Vec<f32> {
    let mut out = v.to_vec();
    unit_in_place(&mut out, dim);
    out
}

/// Each row of `v` scaled to unit length, in place.
pub fn unit_in_place(v: &mut [f32], dim: usize) {
    v.par_chunks_mut(dim.max(1)).for_each(|r| {
        let n = r.iter().map(|x| x * x).sum::<f32>().sqrt();
        if n > 0.0 {
            r.iter_mut().for_each(|x| *x /= n);
        }
    });
}

/// Per row of `x` (row after row, `dim` wide), the `p` centroids (rows of `c`) with the largest
/// dot products, best first, with those products: row i's are at [i * p .. (i + 1) * p].
pub fn nearest_centroids(x: &[f32], c: &[f32], dim: usize, p: usize) -> Result<Vec<(u32, f32)>> {
    let (n, lists) = (x.len() / dim, c.len() / dim);
    let p = p.min(lists);
    let b = blas().ok_or_else(|| Error::msg("the IVF index needs a BLAS (none was loaded)"))?;
    let mut out = vec![(0u32, 0f32); n * p];
    let mut scores = Vec::new();
    for r0 in (0..n).step_by(ROW_BLOCK) {
        let r1 = (r0 + ROW_BLOCK).min(n);
        scores.resize((r1 - r0) * lists, 0.0);
        let rows = &x[r0 * dim..r1 * dim];
        b.sgemm(
            NO_TRANS,
            TRANS,
            r1 - r0,
            lists,
            dim,
            rows,
            dim,
            c,
            dim,
            &mut scores,
        )
        .map_err(|e| Error::msg(format!("IVF lists: {e}")))?;
        out[r0 * p..r1 * p]
            .par_chunks_mut(p)
            .zip(scores.par_chunks(lists))
            .for_each(|(best, s)| {
                if p == 1 {
                    // the assignment: one argmax, no list to sort
                    let (mut at, mut top) = (0u32, f32::NEG_INFINITY);
                    for (l, &v) in s.iter().enumerate() {
                        if v > top {
                            (at, top) = (l as u32, v);
                        }
                    }
                    best[0] = (at, top);
                    return;
                }
                let mut all: Vec<(u32, f32)> = (0..lists as u32).zip(s.iter().copied()).collect();
                keep_best(&mut all, p);
                best.copy_from_slice(&all);
            });
    }
    Ok(out)
}

/// `lists` unit centroids of the unit rows `sample`: seeded with distinct sample rows, then
/// Lloyd's iterations; a list left empty takes the sample row its centroid serves worst.
pub fn train(sample: &[f32], dim: usize, lists: usize, seed: u64) -> Result<Vec<f32>> {
    let n = sample.len() / dim;
    if lists == 0 || lists > n {
        return Err(Error::msg(format!(
            "IVF: {lists} lists from {n} vectors (at most one list a vector)"
        )));
    }
    let mut rng = StdRng::seed_from_u64(seed);
    let mut picks = rand::seq::index::sample(&mut rng, n, lists).into_vec();
    picks.sort_unstable();
    let mut c: Vec<f32> = picks
        .iter()
        .flat_map(|&i| sample[i * dim..(i + 1) * dim].iter().copied())
        .collect();
    for _ in 0..ITERATIONS {
        let best = nearest_centroids(sample, &c, dim, 1)?;
        let mut sums = vec![0f64; lists * dim];
        let mut counts = vec![0usize; lists];
        for (row, &(l, _)) in sample.chunks(dim).zip(&best) {
            let l = l as usize;
            counts[l] += 1;
            sums[l * dim..(l + 1) * dim]
                .iter_mut()
                .zip(row)
                .for_each(|(s, &x)| *s += x as f64);
        }
        // the worst-served rows, worst first, re-seed the empty lists
        let mut worst: Vec<usize> = (0..n).collect();
        worst.sort_by(|&a, &b| best[a].1.total_cmp(&best[b].1).then(a.cmp(&b)));
        let mut spare = worst.into_iter();
        for l in 0..lists {
            let centre = &mut c[l * dim..(l + 1) * dim];
            if counts[l] == 0 {
                let i = spare.next().expect("fewer lists than rows");
                centre.copy_from_slice(&sample[i * dim..(i + 1) * dim]);
                continue;
            }
            let s = &sums[l * dim..(l + 1) * dim];
            let norm = s.iter().map(|x| x * x).sum::<f64>().sqrt().max(1e-30);
            centre
                .iter_mut()
                .zip(s)
                .for_each(|(x, &v)| *x = (v / norm) as f32);
        }
    }
    Ok(c)
}

/// Keep the `k` of largest score (equal scores by id), best first.
pub fn keep_best(c: &mut Vec<(u32, f32)>, k: usize) {
    let by = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
    if c.len() > k && k > 0 {
        c.select_nth_unstable_by(k - 1, by);
    }
    c.truncate(k);
    c.sort_by(by);
}
