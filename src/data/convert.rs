//! Converting any supported dataset to Parquet (zstd), streamed, optionally keeping a seeded random
//! sample of rows in file order (a small labelled train set).
use super::{ColumnSpec, Format};
use crate::error::{Error, Result};
use indicatif::ProgressBar;
use rand::seq::index::sample;
use rand::SeedableRng;
use std::path::Path;

/// Rows to keep: all, or N drawn without replacement (seeded), kept in file order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rows {
    All,
    Sample { n: usize, seed: u64 },
}

/// Write `input`'s `columns` (all when None) to `output`, atomically; returns the rows written.
pub fn convert(
    input: &Path,
    output: &Path,
    columns: Option<&ColumnSpec>,
    rows: Rows,
    progress: &ProgressBar,
) -> Result<usize> {
    if Format::from_path(output)? != Format::Parquet {
        return Err(Error::file(output, "the output must be a .parquet file"));
    }
    let columns = match columns {
        Some(c) => c.resolve(input)?,
        None => super::column_names(input)?,
    };
    let cols: Vec<&str> = columns.iter().map(String::as_str).collect();
    let reader = super::open(input, &cols)?;
    if let Some(n) = reader.total_rows {
        progress.set_length(n);
    }
    match rows {
        Rows::All => super::stream_to_parquet(reader, output, progress, |b| Ok(b.data.clone())),
        Rows::Sample { n, seed } => write_sample(reader, input, output, n, seed),
    }
}

fn write_sample(
    reader: super::BatchReader,
    input: &Path,
    output: &Path,
    n: usize,
    seed: u64,
) -> Result<usize> {
    let batches: Vec<arrow_array::RecordBatch> =
        reader.map(|b| b.map(|b| b.data)).collect::<Result<_>>()?;
    let schema = batches
        .first()
        .map(|b| b.schema())
        .ok_or_else(|| Error::file(input, "empty dataset"))?;
    let all = arrow_select::concat::concat_batches(&schema, &batches)
        .map_err(|e| Error::file(input, e))?;
    if n > all.num_rows() {
        return Err(Error::file(
            input,
            format!("--sample {n}: the file has only {} rows", all.num_rows()),
        ));
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut idx: Vec<u32> = sample(&mut rng, all.num_rows(), n)
        .into_iter()
        .map(|i| i as u32)
        .collect();
    idx.sort_unstable();
    let take = arrow_array::UInt32Array::from(idx);
    let picked =
        arrow_select::take::take_record_batch(&all, &take).map_err(|e| Error::file(input, e))?;
    super::write_parquet(output, picked.schema(), [&picked])?;
    Ok(n)
}
