use super::named::Named;
use super::progress::{self, out};
use super::shard_opts::{shard_note, ShardOpts};
use crate::data::ColumnSpec;
use crate::data::Io;
use crate::error::Result;
use crate::flags;
use crate::overlap::{self, Mode, Options, Source};
use crate::tokenize::Tokenizer;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Model folder or tokenizer.json whose WordPiece tokens are counted
    #[arg(value_parser = crate::model::folders::home::parse_model, long = flags::TOKENIZER, default_value = "all-MiniLM-L6-v2")]
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
    // (--approx: the MinHash hash seed)
    #[command(flatten)]
    seed: flags::Seed,
    /// Output folder for overlap.json, overlap.csv, overlap.svg, overlap.png
    #[arg(long = flags::OUT, default_value = "out/overlap")]
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
            seed: a.seed.seed,
        },
        None => Mode::Exact,
    };
    let opts = Options {
        ngram: a.ngram as usize,
        stride: a.stride as usize,
        mode,
    };
    let shard = a
        .shard
        .resolve(|| overlap::shard_settings(&sources, &opts, &a.tokenizer))?;
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
    let (dest, rows) = overlap::compute_shard(&sources, &tok, &opts, &a.out, &run, &bar)?;
    bar.finish_and_clear();
    out(&format!(
        "wrote {}\n{}",
        dest.display(),
        shard_note(Some(&run), rows, "rows")
    ));
    Ok(())
}

impl Args {
    pub fn io(&self) -> Io {
        let io = Io::new().input("--tokenizer", &self.tokenizer);
        self.datasets
            .iter()
            .fold(io, |io, d| io.input("NAME=PATH", &d.path))
            .output("--out", &self.out)
    }
}
