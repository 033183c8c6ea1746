use super::{out, progress, split_list};
use crate::data::{self, ParquetSink};
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
    let mut sink: Option<ParquetSink> = None;
    let mut rows = 0;
    for batch in reader {
        let batch = batch?;
        if sink.is_none() {
            sink = Some(ParquetSink::create(&a.output, batch.data.schema())?);
        }
        sink.as_mut().unwrap().write(&batch.data)?;
        rows += batch.num_rows();
        bar.inc(batch.num_rows() as u64);
    }
    bar.finish_and_clear();
    sink.expect("an empty input is an error before this point")
        .finish()?;
    out(&format!("wrote {rows} rows to {}\n", a.output.display()));
    Ok(())
}
