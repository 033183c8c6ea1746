use super::progress::{self, out};
use crate::data::Io;
use crate::data::{convert, ColumnSpec, Rows};
use crate::error::Result;
use crate::flags;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Input dataset (.parquet, .arrow, .csv, .tsv, .jsonl, .txt)
    input: PathBuf,
    /// Output .parquet (written atomically)
    output: PathBuf,
    /// Columns to keep (default: all)
    #[arg(long = flags::COLUMNS)]
    columns: Option<ColumnSpec>,
    /// Keep a random sample of N rows (in their original order), e.g. a small labelled train set
    #[arg(long = flags::SAMPLE)]
    sample: Option<usize>,
    // (the seed of --sample)
    #[command(flatten)]
    seed: flags::Seed,
    /// Replace a 0/1 (or [0, 1]) label column by 1 - label, e.g. RTE's 0 = entailment into 1 = similar
    #[arg(long, value_name = "COLUMN")]
    invert_label: Option<String>,
}

pub fn run(a: Args) -> Result<()> {
    let rows = match a.sample {
        Some(n) => Rows::Sample {
            n,
            seed: a.seed.seed,
        },
        None => Rows::All,
    };
    let bar = progress::bar(None, "rows");
    let n = convert(
        &a.input,
        &a.output,
        a.columns.as_ref(),
        rows,
        a.invert_label.as_deref(),
        &bar,
    )?;
    bar.finish_and_clear();
    out(&format!("wrote {n} rows to {}\n", a.output.display()));
    Ok(())
}

impl Args {
    pub fn io(&self) -> Io {
        Io::new()
            .input("INPUT", &self.input)
            .output("OUTPUT", &self.output)
    }
}
