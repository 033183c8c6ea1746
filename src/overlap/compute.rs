//! Counting: every dataset's texts streamed through the tokenizer in parallel chunks into n-gram
//! sets or MinHash sketches, reduced to the report (whole) or to parts (a shard's rows).
use super::exact::NgramSet;
use super::minhash::MinHasher;
use super::ngrams::NgramPacker;
use super::options::{Mode, Options, Source};
use super::parts::Parts;
use super::report::OverlapReport;
use crate::data;
use crate::error::Result;
use crate::tokenize::Tokenizer;
use indicatif::ProgressBar;
use rayon::prelude::*;
use std::ops::Range;

/// Rows tokenized per parallel task: big enough to amortize scheduling, small enough to balance.
const CHUNK: usize = 256;

/// Stream every text of `rows` of `src` through the tokenizer, hand each chunk's n-gram keys to
/// `per_chunk` (in parallel) and fold the results in order with `fold`.
fn scan<T: Send>(
    src: &Source,
    rows: Range<usize>,
    tok: &Tokenizer,
    packer: &NgramPacker,
    progress: &ProgressBar,
    per_chunk: impl Fn(Vec<u128>) -> T + Sync,
    mut fold: impl FnMut(T),
) -> Result<()> {
    let cols: Vec<&str> = src.columns.iter().map(String::as_str).collect();
    for batch in data::blocks(data::open(&src.path, &cols)?, rows, data::BATCH_ROWS) {
        let batch = batch?;
        let mut texts = Vec::with_capacity(batch.num_rows() * cols.len());
        for c in &cols {
            texts.extend(batch.texts(c)?);
        }
        let results: Vec<Result<T>> = texts
            .par_chunks(CHUNK)
            .map(|chunk| {
                let mut ids = Vec::with_capacity(64);
                let mut keys = Vec::with_capacity(chunk.len() * 24);
                for t in chunk {
                    ids.clear();
                    tok.ids_into(t, &mut ids)?;
                    packer.for_each(&ids, |k| keys.push(k));
                }
                Ok(per_chunk(keys))
            })
            .collect();
        for r in results {
            fold(r?);
        }
        progress.inc(batch.num_rows() as u64);
    }
    Ok(())
}

/// Rows across all sources when every format records its row count (for a progress bar length).
pub fn total_rows(sources: &[Source]) -> Option<u64> {
    let mut total = 0;
    for s in sources {
        let cols: Vec<&str> = s.columns.iter().map(String::as_str).collect();
        total += data::open(&s.path, &cols).ok()?.total_rows?;
    }
    Some(total)
}

pub fn compute(
    sources: &[Source],
    tok: &Tokenizer,
    opts: &Options,
    progress: &ProgressBar,
) -> Result<OverlapReport> {
    // every row: an open-ended range, so no extra pass to count them
    let all = vec![0..usize::MAX; sources.len()];
    Ok(compute_parts(sources, &all, tok, opts, progress)?.report())
}

/// The n-gram sets (or sketches) of `rows[i]` of each source `i`: a whole run's, or a shard's
/// part of it.
pub fn compute_parts(
    sources: &[Source],
    rows: &[Range<usize>],
    tok: &Tokenizer,
    opts: &Options,
    progress: &ProgressBar,
) -> Result<Parts> {
    let packer = NgramPacker::new(opts.ngram, opts.stride, tok.vocab_size())?;
    let names: Vec<String> = sources.iter().map(|s| s.name.clone()).collect();
    match opts.mode {
        Mode::Exact => {
            let mut sets = Vec::with_capacity(sources.len());
            for (src, r) in sources.iter().zip(rows) {
                let mut set = NgramSet::default();
                scan(
                    src,
                    r.clone(),
                    tok,
                    &packer,
                    progress,
                    |keys| keys,
                    |keys| set.extend(keys),
                )?;
                sets.push(set);
            }
            Ok(Parts::exact(names, *opts, sets))
        }
        Mode::Approx { num_perm, seed } => {
            let hasher = MinHasher::new(num_perm, seed);
            let mut sketches = Vec::with_capacity(sources.len());
            for (src, r) in sources.iter().zip(rows) {
                let mut sketch = hasher.empty();
                let per_chunk = |mut keys: Vec<u128>| {
                    // duplicates cannot change a minimum: drop them before the k hashes per key
                    keys.sort_unstable();
                    keys.dedup();
                    let mut s = hasher.empty();
                    hasher.update(&mut s, &keys);
                    s
                };
                scan(src, r.clone(), tok, &packer, progress, per_chunk, |s| {
                    sketch.merge(&s)
                })?;
                sketches.push(sketch);
            }
            Ok(Parts::approx(names, *opts, sketches))
        }
    }
}
