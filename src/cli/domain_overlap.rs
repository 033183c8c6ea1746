use super::shard_opts::{shard_note, ShardOpts};
use super::{out, progress, Named};
use condenser::data::ColumnSpec;
use condenser::error::Result;
use condenser::overlap::{self, Mode, Options, Source};
use condenser::shard::model_fingerprint;
use condenser::tokenize::Tokenizer;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Model folder or tokenizer.json whose WordPiece tokens are counted
    #[arg(long, default_value = "datasets/model/all-MiniLM-L6-v2")]
    tokenizer: PathBuf,
    /// n-gram length
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..))]
    ngram: u64,
    /// 1: every adjacent n-gram; s > 1: the article's loop range(0, len, s), keeping a short tail
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    stride: u64,
    /// Text columns (default: sentence1,sentence2 where present, else text)
    #[arg(long)]
    columns: Option<ColumnSpec>,
    /// Estimate with MinHash of this many permutations (bounded memory for huge corpora)
    #[arg(long, value_name = "NUM_PERM", value_parser = clap::value_parser!(u64).range(1..))]
    approx: Option<u64>,
    /// MinHash hash seed
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Output folder for overlap.json, overlap.csv, overlap.svg, overlap.png
    #[arg(long, default_value = "out/overlap")]
    out: PathBuf,
    /// Datasets as NAME=PATH (or PATH, named by its file stem)
    #[arg(required = true, value_name = "NAME=PATH")]
    datasets: Vec<Named>,
    /// A shard writes its n-gram sets (or sketches) as OUT/overlap.shard-…parts; `condenser merge
    /// OUT` unites them into the report
    #[command(flatten)]
    shard: ShardOpts,
}

pub fn run(a: Args) -> Result<()> {
    let sources = a
        .datasets
        .iter()
        .map(|d| Source::new(d.name.clone(), d.path.clone(), a.columns.as_ref()))
        .collect::<Result<Vec<_>>>()?;
    let tok = Tokenizer::load(&a.tokenizer)?;
    let mode = match a.approx {
        Some(k) => Mode::Approx {
            num_perm: k as usize,
            seed: a.seed,
        },
        None => Mode::Exact,
    };
    let opts = Options {
        ngram: a.ngram as usize,
        stride: a.stride as usize,
        mode,
    };
    let datasets: Vec<String> = a
        .datasets
        .iter()
        .map(|d| format!("{}={}", d.name, d.path.display()))
        .collect();
    let shard = a.shard.resolve(&[
        ("datasets", datasets.join(" ")),
        (
            "columns",
            format!("{:?}", a.columns.as_ref().map(|c| c.to_string())),
        ),
        ("tokenizer_fingerprint", model_fingerprint(&a.tokenizer)?),
        ("ngram", a.ngram.to_string()),
        ("stride", a.stride.to_string()),
        ("mode", format!("{mode:?}")),
    ])?;
    let bar = progress::bar(overlap::total_rows(&sources), "rows");
    let Some(run) = shard else {
        let report = overlap::compute(&sources, &tok, &opts, &bar)?;
        bar.finish_and_clear();
        report.save(&a.out)?;
        out(&format!(
            "{}\nwrote {}/overlap.{{json,csv,svg,png}}\n",
            report.table(),
            a.out.display()
        ));
        return Ok(());
    };
    let counts = sources
        .iter()
        .map(|s| condenser::data::count_rows(&s.path))
        .collect::<Result<Vec<_>>>()?;
    let ranges: Vec<_> = counts.iter().map(|&n| run.shard.rows(n)).collect();
    bar.set_length(ranges.iter().map(|r| r.len() as u64).sum());
    let parts = overlap::compute_parts(&sources, &ranges, &tok, &opts, &bar)?;
    bar.finish_and_clear();
    let dest = run.shard.file(&a.out.join("overlap.parts"));
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
    out(&format!(
        "wrote {}\n{}",
        dest.display(),
        shard_note(Some(&run), rows, "rows")
    ));
    Ok(())
}
