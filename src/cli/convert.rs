use super::{out, progress, split_list};
use crate::data;
use crate::error::{Error, Result};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Input dataset (.parquet, .arrow, .csv, .tsv, .jsonl)
    input: PathBuf,
    /// Output .parquet (written atomically)
    output: PathBuf,
    /// Columns to keep (default: all)
    #[arg(long)]
    columns: Option<String>,
}

pub fn run(a: Args) -> Result<()> {
    if data::Format::from_path(&a.output)? != data::Format::Parquet {
        return Err(Error::file(&a.output, "the output must be a .parquet file"));
    }
    let columns = match &a.columns {
        Some(c) => split_list(c),
        None => data::column_names(&a.input)?,
    };
    let cols: Vec<&str> = columns.iter().map(String::as_str).collect();
    let reader = data::open(&a.input, &cols)?;
    let bar = progress::bar(reader.total_rows, "rows");
    let rows = data::stream_to_parquet(reader, &a.output, &bar, |b| Ok(b.data.clone()))?;
    bar.finish_and_clear();
    out(&format!("wrote {rows} rows to {}\n", a.output.display()));
    Ok(())
}
