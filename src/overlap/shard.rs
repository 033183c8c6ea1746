//! One shard of a domain-overlap run: the n-gram sets (or sketches) of its rows of every dataset,
//! written as OUT/overlap.shard-…parts with a manifest, for `merge` to unite into the report.
use super::compute::compute_parts;
use super::options::{Options, Source};
use crate::error::Result;
use crate::shard::{self, Settings, ShardRun};
use crate::tokenize::Tokenizer;
use indicatif::ProgressBar;
use std::path::{Path, PathBuf};

/// What every shard of a run must share: the datasets and their columns, the options, and the
/// tokenizer's fingerprint.
pub fn shard_settings(sources: &[Source], opts: &Options, tokenizer: &Path) -> Result<Settings> {
    #[derive(serde::Serialize)]
    struct Job<'a> {
        sources: &'a [Source],
        options: &'a Options,
    }
    shard::settings(
        &Job {
            sources,
            options: opts,
        },
        &[("tokenizer", Some(tokenizer))],
    )
}

/// Compute and write this shard's part (each dataset's rows of the shard, in whole blocks); the
/// file written and the rows it covers.
pub fn compute_shard(
    sources: &[Source],
    tok: &Tokenizer,
    opts: &Options,
    out_dir: &Path,
    run: &ShardRun,
    progress: &ProgressBar,
) -> Result<(PathBuf, usize)> {
    let counts = sources
        .iter()
        .map(|s| crate::data::count_rows(&s.path))
        .collect::<Result<Vec<_>>>()?;
    let ranges: Vec<_> = counts.iter().map(|&n| run.shard.rows(n)).collect();
    progress.set_length(ranges.iter().map(|r| r.len() as u64).sum());
    let parts = compute_parts(sources, &ranges, tok, opts, progress)?;
    let dest = run.shard.file(&out_dir.join("overlap.parts"));
    parts.write(&dest)?;
    // the unit is a row of any dataset: a shard's range per dataset sums to a contiguous range
    let before: usize = ranges.iter().map(|r| r.start).sum();
    let rows: usize = ranges.iter().map(|r| r.len()).sum();
    run.finish(
        "domain-overlap",
        &dest,
        counts.iter().sum(),
        before..before + rows,
        true,
    )?;
    Ok((dest, rows))
}
