//! The breadth a new index searches at by default, measured rather than guessed: how many lists
//! an IVF must scan (or how wide a graph walk must be) for recall@10 against exact search
//! depends on the data (1M clustered synthetic vectors reach 0.98 scanning 0.7% of the corpus,
//! 100k real sentence embeddings 11% with second lists, 16% without: benches/README.md). So the
//! build ends by searching a seeded sample of the index's own vectors both ways, each excluding
//! itself, and keeps the narrowest breadth that reaches the target.
use super::ann::AnnIndex;
use super::exact::TopK;
use super::score::ScoreFn;
use super::store::StoredEmbeddings;
use crate::error::Result;
use crate::model::Embeddings;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;

/// Vectors of the store searched for the calibration.
const QUERIES: usize = 1000;
/// The recall measured is recall@K (the candidates asked are 2K, as a search of top K asks).
const K: usize = 10;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    pub target_recall: f64,
    /// The narrowest breadth reaching the target (else the widest tried).
    pub breadth: usize,
    pub recall: f64,
    pub queries: usize,
    /// Each breadth tried and its recall@10.
    pub tried: Vec<(usize, f64)>,
    /// An IVF's entries scanned a query at `breadth`.
    pub scanned: Option<f64>,
}

impl Calibration {
    pub fn reached(&self) -> bool {
        self.recall >= self.target_recall
    }

    /// Whether searches at this calibration cost less than at `other`'s for the target: the
    /// one reaching it, else the fewer entries scanned, else the better recall.
    pub fn cheaper_than(&self, other: &Calibration) -> bool {
        match (self.reached(), other.reached()) {
            (true, true) => self.scanned.unwrap_or(f64::MAX) < other.scanned.unwrap_or(f64::MAX),
            (a, b) if a != b => a,
            _ => self.recall > other.recall,
        }
    }
}

/// `n` of `rows` row numbers, a seeded sample in order.
pub fn sample_picks(rows: usize, n: usize, seed: u64) -> Vec<usize> {
    use rand::SeedableRng;
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut picks = rand::seq::index::sample(&mut rng, rows, n.min(rows)).into_vec();
    picks.sort_unstable();
    picks
}

/// The vectors of the store's rows `picks` (in order), row after row.
pub fn rows_of(store: &StoredEmbeddings, picks: &[usize]) -> Result<Vec<f32>> {
    let (dim, mut next) = (store.meta.dim, picks.iter().copied().peekable());
    let mut out = Vec::with_capacity(picks.len() * dim);
    store.for_each(false, |first, b, v| {
        while let Some(r) = next.next_if(|&r| r < first + b.num_rows()) {
            out.extend_from_slice(&v[(r - first) * dim..(r - first + 1) * dim]);
        }
        Ok(())
    })?;
    Ok(out)
}

/// A seeded sample of the store's own vectors and their exact top 10 (each excluding itself),
/// measured once, to calibrate an index (or its variants) against.
pub struct Calibrator {
    picks: Vec<usize>,
    q: Embeddings,
    exact: Vec<Vec<(usize, f32)>>,
}

impl Calibrator {
    pub fn new(store: &StoredEmbeddings, rows: usize) -> Result<Calibrator> {
        let picks = sample_picks(rows, QUERIES, 1);
        let q = Embeddings {
            dim: store.meta.dim,
            data: rows_of(store, &picks)?,
        };
        let tie = |a: usize, b: usize| a.cmp(&b);
        let itself = |qi: usize, d: usize| picks[qi] == d;
        let mut top = TopK::new(q.clone(), ScoreFn::Cosine, K);
        store.for_each(false, |first, _, v| top.add(first, &v, &itself, &tie))?;
        let exact = top.finish(&tie);
        Ok(Calibrator { picks, q, exact })
    }

    /// The narrowest of the index's breadths whose recall@10 against exact search reaches
    /// `target`; none for an index without a calibration ladder (a graph:
    /// `AnnIndex::calibration_ladder` says why).
    pub fn run(&self, index: &AnnIndex, target: f64) -> Result<Option<Calibration>> {
        let Some(ladder) = index.calibration_ladder() else {
            return Ok(None);
        };
        let itself = |qi: usize, d: usize| self.picks[qi] == d;
        let mut tried = Vec::new();
        for breadth in ladder {
            let found = index.nearest(&self.q, 2 * K + 1, breadth)?;
            let (mut hit, mut all) = (0, 0);
            for (qi, (truth, got)) in self.exact.iter().zip(&found).enumerate() {
                let got: HashSet<usize> = got
                    .iter()
                    .copied()
                    .filter(|&d| !itself(qi, d))
                    .take(2 * K)
                    .collect();
                hit += truth.iter().filter(|h| got.contains(&h.0)).count();
                all += truth.len();
            }
            let recall = hit as f64 / all.max(1) as f64;
            tried.push((breadth, recall));
            if recall >= target {
                break;
            }
        }
        let &(breadth, recall) = tried.last().expect("a ladder has a step");
        Ok(Some(Calibration {
            target_recall: target,
            breadth,
            recall,
            queries: self.picks.len(),
            tried,
            scanned: index.scanned(&self.q, breadth)?,
        }))
    }
}
