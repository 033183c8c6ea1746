//! Spherical k-means for the IVF index's lists (unit vectors, so the nearest centroid is the one
//! of largest dot product): both the assignment and the search's choice of lists are one BLAS
//! GEMM per block of rows against all centroids.
use crate::error::{Error, Result};
use crate::model::kernels::blas::{blas, NO_TRANS, TRANS};
use crate::model::layers::pooling::l2_normalize_row;
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

/// Each row of `v` scaled to unit length, in place (the encoders' row normaliser).
pub fn unit_in_place(v: &mut [f32], dim: usize) {
    v.par_chunks_mut(dim.max(1)).for_each(l2_normalize_row);
}

/// Per row of `x` (row after row, `dim` wide), the `p` centroids (rows of `c`) with the largest
/// dot products, best first, with those products: row i's are at [i * p .. (i + 1) * p].
pub fn nearest_centroids(x: &[f32], c: &[f32], dim: usize, p: usize) -> Result<Vec<(u32, f32)>> {
    let (n, lists) = (x.len() / dim, c.len() / dim);
    let p = p.min(lists);
    let mut out = vec![(0u32, 0f32); n * p];
    let mut scores = Vec::new();
    for r0 in (0..n).step_by(ROW_BLOCK) {
        let r1 = (r0 + ROW_BLOCK).min(n);
        centroid_scores(&x[r0 * dim..r1 * dim], c, dim, &mut scores)?;
        out[r0 * p..r1 * p]
            .par_chunks_mut(p)
            .zip(scores.par_chunks(lists))
            .for_each(|(best, s)| {
                if p == 1 {
                    // the assignment: one argmax, no list to sort
                    let at = argmax(s);
                    best[0] = (at, s[at as usize]);
                    return;
                }
                let mut all: Vec<(u32, f32)> = (0..lists as u32).zip(s.iter().copied()).collect();
                keep_best(&mut all, p);
                best.copy_from_slice(&all);
            });
    }
    Ok(out)
}

/// How much a second list's residual parallel to the first list's costs (SOAR's lambda).
const SPILL_WEIGHT: f32 = 1.0;

/// Each unit row of `x`'s list (its nearest centroid) and a second list it is also filed under
/// (SOAR: Sun et al., "SOAR: Improved Indexing for Approximate Nearest Neighbor Search", 2023):
/// the centroid c minimising |x - c|^2 + SPILL_WEIGHT (r.(x - c))^2, r the unit residual of x
/// from its first centroid. A query then misses x only where both residuals point away from it,
/// and SOAR's penalty makes the second residual point elsewhere than the first. On 100k real
/// sentence embeddings this reaches recall@10 0.98 scanning 8% of the entries where one list
/// needs 14% (measured with numpy before it was built; benches/README.md). None (u32::MAX)
/// with one list.
pub fn assign_spilled(x: &[f32], c: &[f32], dim: usize) -> Result<Vec<(u32, u32)>> {
    let (n, lists) = (x.len() / dim, c.len() / dim);
    let (mut near, mut along, mut resid) = (Vec::new(), Vec::new(), Vec::new());
    let mut out = Vec::with_capacity(n);
    for r0 in (0..n).step_by(ROW_BLOCK) {
        let r1 = (r0 + ROW_BLOCK).min(n);
        let rows = &x[r0 * dim..r1 * dim];
        centroid_scores(rows, c, dim, &mut near)?;
        let first: Vec<u32> = near.par_chunks(lists).map(argmax).collect();
        // unit residuals from the first centroid (zero where x is its centroid)
        resid.clear();
        for (row, &l) in rows.chunks(dim).zip(&first) {
            let centre = &c[l as usize * dim..(l as usize + 1) * dim];
            resid.extend(row.iter().zip(centre).map(|(a, b)| a - b));
        }
        unit_in_place(&mut resid, dim);
        centroid_scores(&resid, c, dim, &mut along)?;
        let picked: Vec<(u32, u32)> = (0..r1 - r0)
            .into_par_iter()
            .map(|i| {
                let (s, a) = (&near[i * lists..][..lists], &along[i * lists..][..lists]);
                let (r, row) = (&resid[i * dim..][..dim], &rows[i * dim..][..dim]);
                let rx: f32 = r.iter().zip(row).map(|(a, b)| a * b).sum();
                let cost = |j: usize| 2.0 - 2.0 * s[j] + SPILL_WEIGHT * (rx - a[j]).powi(2);
                let other = (0..lists)
                    .filter(|&j| j != first[i] as usize)
                    .min_by(|&i, &j| cost(i).total_cmp(&cost(j)).then(i.cmp(&j)));
                (first[i], other.map_or(u32::MAX, |j| j as u32))
            })
            .collect();
        out.extend(picked);
    }
    Ok(out)
}

/// `out` = the dot products of each row of `rows` with each centroid (rows of `c`), one GEMM.
fn centroid_scores(rows: &[f32], c: &[f32], dim: usize, out: &mut Vec<f32>) -> Result<()> {
    let (n, lists) = (rows.len() / dim, c.len() / dim);
    let b = blas().ok_or_else(|| Error::msg("the IVF index needs a BLAS (none was loaded)"))?;
    out.resize(n * lists, 0.0);
    b.sgemm(NO_TRANS, TRANS, n, lists, dim, rows, dim, c, dim, out)
        .map_err(|e| Error::msg(format!("IVF lists: {e}")))
}

/// The index of the largest score (the first of equals).
fn argmax(s: &[f32]) -> u32 {
    let (mut at, mut top) = (0u32, f32::NEG_INFINITY);
    for (l, &v) in s.iter().enumerate() {
        if v > top {
            (at, top) = (l as u32, v);
        }
    }
    at
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
