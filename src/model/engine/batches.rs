//! Inference batches for the engine: items sorted longest first and cut into batches of at most a
//! token budget (not a row count), so that short and long texts alike fill the GEMMs; the batches
//! run on as many threads as rayon has, each with a serial BLAS (on 2 cores that beats one
//! stream with a threaded BLAS: benches/README.md, issue 35), and every item's result comes back
//! in input order.
use super::threads::in_threads;
use crate::model::kernels::blas::serial;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Item indices, longest first (equal lengths in input order), cut into batches of at most
/// `budget` tokens each (an item longer than the budget goes alone). The budget shrinks so that
/// the batch count is a multiple of 4: 3 full batches on 2 threads leave one thread idle for a
/// third of the run (cross-encoder pairs at 32 x 512 tokens a batch were that: 4 smaller ones
/// ran 11% faster), and 4 is even work on 1, 2 or 4 threads. The cut never depends on the
/// thread count: a text's result depends on the batch it is in (the GEMM's blocking), and
/// `--threads` must change speed only (tests/engine.rs checks 1, 2 and 3 threads bit for bit).
pub fn token_batches(lens: &[usize], budget: usize) -> Vec<Vec<usize>> {
    let budget = balanced_budget(lens.iter().sum(), budget.max(1));
    let mut order: Vec<usize> = (0..lens.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(lens[i]));
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut tokens = 0;
    for i in order {
        match out.last_mut() {
            Some(b) if tokens + lens[i] <= budget => b.push(i),
            _ => {
                out.push(vec![i]);
                tokens = 0;
            }
        }
        tokens += lens[i];
    }
    out
}

/// Batches a cut is rounded up to a multiple of.
const BATCH_MULTIPLE: usize = 4;

/// The budget <= `budget` that cuts `total` tokens into about a multiple of `BATCH_MULTIPLE`
/// batches of equal size.
fn balanced_budget(total: usize, budget: usize) -> usize {
    let batches = total.div_ceil(budget).div_ceil(BATCH_MULTIPLE) * BATCH_MULTIPLE;
    total.div_ceil(batches.max(1)).clamp(1, budget)
}

/// `f` over the token batches of `lens`, on `threads` threads (one: here), a serial BLAS each;
/// one result per item, in input order. `progress` counts items.
pub fn run_batches<R: Send>(
    lens: &[usize],
    budget: usize,
    threads: usize,
    progress: &indicatif::ProgressBar,
    f: impl Fn(&[usize]) -> crate::Result<Vec<R>> + Sync,
) -> crate::Result<Vec<R>> {
    let batches = token_batches(lens, budget);
    let slots: Mutex<Vec<Option<R>>> = Mutex::new((0..lens.len()).map(|_| None).collect());
    let next = AtomicUsize::new(0);
    // a cancelled call (Ctrl-C in Python) stops before its next batch, on whichever thread
    let cancel = crate::runtime::cancel::current();
    // threads take the next batch as they finish one: batches differ in cost (attention grows
    // with length), so a fixed deal would leave a thread idle. The BLAS is serial even on one
    // thread: a threaded GEMM splits a batch by the library's thread count, and the bits with it
    serial(|| {
        in_threads(
            threads.clamp(1, batches.len().max(1)),
            |_| -> crate::Result<()> {
                loop {
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    let Some(batch) = batches.get(k) else {
                        return Ok(());
                    };
                    cancel.check()?;
                    let rows = f(batch)?;
                    assert_eq!(rows.len(), batch.len(), "one result per item");
                    let mut s = slots
                        .lock()
                        .expect("no thread panicked holding the results");
                    for (&i, r) in batch.iter().zip(rows) {
                        s[i] = Some(r);
                    }
                    progress.inc(batch.len() as u64);
                }
            },
        )
    })?;
    Ok(slots
        .into_inner()
        .expect("no thread panicked holding the results")
        .into_iter()
        .map(|r| r.expect("every item batched"))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_hold_the_budget_longest_first_and_every_item_once() {
        let lens = [5, 40, 7, 7, 300, 12];
        // 371 tokens at 100 a batch would be 4 batches; 200 a batch, 2: both become 4 of <= 93
        assert_eq!(balanced_budget(371, 100), 93);
        assert_eq!(balanced_budget(371, 200), 93);
        assert_eq!(balanced_budget(371, 50), 47); // 8 batches
        let b = token_batches(&lens, 100);
        assert_eq!(b, vec![vec![4], vec![1, 5, 2, 3, 0]]);
        let out = run_batches(&lens, 50, 2, &indicatif::ProgressBar::hidden(), |batch| {
            Ok(batch.iter().map(|&i| lens[i] * 10).collect())
        })
        .unwrap();
        assert_eq!(out, vec![50, 400, 70, 70, 3000, 120]);
    }
}
