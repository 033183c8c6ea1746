//! Counting: every dataset's texts streamed through the tokenizer in parallel chunks into n-gram
//! sets or MinHash sketches, reduced to the report (whole) or to parts (a shard's rows).
use super::exact::NgramSet;
use super::minhash::{MinHasher, Sketch};
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

/// Every text of `texts` through the tokenizer, each chunk's n-gram keys handed to `per_chunk`
/// (in parallel) and the results folded in order with `fold`.
fn scan_texts<T: Send>(
    texts: &[&str],
    tok: &Tokenizer,
    packer: &NgramPacker,
    per_chunk: &(impl Fn(Vec<u128>) -> T + Sync),
    fold: &mut impl FnMut(T),
) -> Result<()> {
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
    Ok(())
}

/// Where a dataset's texts come from: `rows` of a file's text columns, read block by block
/// (progress counts rows), or texts already in memory (the Python API's lists).
enum Texts<'a> {
    File(&'a Source, Range<usize>),
    Memory(&'a [String]),
}

impl Texts<'_> {
    /// Hand each block of texts to `f`.
    fn each_block(
        &self,
        progress: &ProgressBar,
        mut f: impl FnMut(&[&str]) -> Result<()>,
    ) -> Result<()> {
        match self {
            Texts::Memory(texts) => {
                let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
                f(&refs)?;
                progress.inc(texts.len() as u64);
            }
            Texts::File(src, rows) => {
                let cols: Vec<&str> = src.columns.iter().map(String::as_str).collect();
                for batch in data::blocks(
                    data::open(&src.path, &cols)?,
                    rows.clone(),
                    data::BATCH_ROWS,
                ) {
                    let batch = batch?;
                    let mut texts = Vec::with_capacity(batch.num_rows() * cols.len());
                    for c in &cols {
                        texts.extend(batch.texts(c)?);
                    }
                    f(&texts)?;
                    progress.inc(batch.num_rows() as u64);
                }
            }
        }
        Ok(())
    }
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

/// The overlap of datasets given as texts in memory, (name, texts) each (the Python API's
/// lists), counted exactly as `compute` counts files.
pub fn compute_texts(
    named: &[(String, Vec<String>)],
    tok: &Tokenizer,
    opts: &Options,
    progress: &ProgressBar,
) -> Result<OverlapReport> {
    let names = named.iter().map(|n| n.0.clone()).collect();
    let texts: Vec<Texts> = named.iter().map(|n| Texts::Memory(&n.1)).collect();
    Ok(count(names, &texts, tok, opts, progress)?.report())
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
    let names = sources.iter().map(|s| s.name.clone()).collect();
    let texts: Vec<Texts> = sources
        .iter()
        .zip(rows)
        .map(|(s, r)| Texts::File(s, r.clone()))
        .collect();
    count(names, &texts, tok, opts, progress)
}

/// Each dataset's n-gram set (or sketch), in order.
fn count(
    names: Vec<String>,
    datasets: &[Texts],
    tok: &Tokenizer,
    opts: &Options,
    progress: &ProgressBar,
) -> Result<Parts> {
    let packer = NgramPacker::new(opts.ngram, opts.stride, tok.vocab_size())?;
    match opts.mode {
        Mode::Exact => {
            let mut sets = Vec::with_capacity(datasets.len());
            for d in datasets {
                let mut set = NgramSet::default();
                let mut fold = |keys| set.extend(keys);
                d.each_block(progress, |texts| {
                    scan_texts(texts, tok, &packer, &|keys| keys, &mut fold)
                })?;
                sets.push(set);
            }
            Ok(Parts::exact(names, *opts, sets))
        }
        Mode::Approx { num_perm, seed } => {
            let hasher = MinHasher::new(num_perm, seed);
            let mut sketches = Vec::with_capacity(datasets.len());
            for d in datasets {
                let mut sketch = hasher.empty();
                let per_chunk = |mut keys: Vec<u128>| {
                    // duplicates cannot change a minimum: drop them before the k hashes per key
                    keys.sort_unstable();
                    keys.dedup();
                    let mut s = hasher.empty();
                    hasher.update(&mut s, &keys);
                    s
                };
                let mut fold = |s: Sketch| sketch.merge(&s);
                d.each_block(progress, |texts| {
                    scan_texts(texts, tok, &packer, &per_chunk, &mut fold)
                })?;
                sketches.push(sketch);
            }
            Ok(Parts::approx(names, *opts, sketches))
        }
    }
}
