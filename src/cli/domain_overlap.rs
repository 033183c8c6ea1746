use super::{named_path, out, progress, split_list};
use crate::data;
use crate::error::{Error, Result};
use crate::overlap::{self, Mode, Options, Source};
use crate::tokenize::Tokenizer;
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct Args {
    /// Model folder or tokenizer.json whose WordPiece tokens are counted
    #[arg(long, default_value = "datasets/model/all-MiniLM-L6-v2")]
    tokenizer: PathBuf,
    /// n-gram length
    #[arg(long, default_value_t = 2)]
    ngram: usize,
    /// 1: every adjacent n-gram; s > 1: the article's loop range(0, len, s), keeping a short tail
    #[arg(long, default_value_t = 1)]
    stride: usize,
    /// Text columns (default: sentence1,sentence2 where present, else text)
    #[arg(long)]
    columns: Option<String>,
    /// Estimate with MinHash of this many permutations (bounded memory for huge corpora)
    #[arg(long, value_name = "NUM_PERM")]
    approx: Option<usize>,
    /// MinHash hash seed
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Output folder for overlap.json, overlap.csv, overlap.svg, overlap.png
    #[arg(long, default_value = "out/overlap")]
    out: PathBuf,
    /// Datasets as NAME=PATH (or PATH, named by its file stem)
    #[arg(required = true, value_name = "NAME=PATH")]
    datasets: Vec<String>,
}

/// The columns to read from `path`: the flag, or sentence1+sentence2 for pair data, or text.
fn columns_for(path: &Path, flag: &Option<String>) -> Result<Vec<String>> {
    if let Some(c) = flag {
        return Ok(split_list(c));
    }
    let have = data::column_names(path)?;
    let has = |c: &str| have.iter().any(|h| h == c);
    if has("sentence1") && has("sentence2") {
        Ok(vec!["sentence1".into(), "sentence2".into()])
    } else if has("text") {
        Ok(vec!["text".into()])
    } else {
        Err(Error::file(
            path,
            format!(
                "no sentence1/sentence2 or text column (has: {}); name them with --columns",
                have.join(", ")
            ),
        ))
    }
}

fn parse_source(spec: &str, columns: &Option<String>) -> Result<Source> {
    let (name, path) = named_path(spec);
    let columns = columns_for(&path, columns)?;
    Ok(Source {
        name,
        path,
        columns,
    })
}

pub fn run(a: Args) -> Result<()> {
    let sources = a
        .datasets
        .iter()
        .map(|d| parse_source(d, &a.columns))
        .collect::<Result<Vec<_>>>()?;
    let tok = Tokenizer::load(&a.tokenizer)?;
    let mode = match a.approx {
        Some(0) => return Err(Error::msg("--approx needs at least 1 permutation")),
        Some(k) => Mode::Approx {
            num_perm: k,
            seed: a.seed,
        },
        None => Mode::Exact,
    };
    let opts = Options {
        ngram: a.ngram,
        stride: a.stride,
        mode,
    };
    let bar = progress::bar(overlap::total_rows(&sources), "rows");
    let report = overlap::compute(&sources, &tok, &opts, &bar)?;
    bar.finish_and_clear();
    report.save(&a.out)?;
    out(&format!(
        "{}\nwrote {}/overlap.{{json,csv,svg,png}}\n",
        report.table(),
        a.out.display()
    ));
    Ok(())
}
