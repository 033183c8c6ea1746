//! Converting any supported dataset to Parquet (zstd), streamed, optionally keeping a seeded random
//! sample of rows in file order (a small labelled train set) and turning a 0/1 label around (RTE's
//! 0 = entailment becomes 1 = similar).
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
    invert_label: Option<&str>,
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
    if let Some(c) = invert_label {
        if !columns.iter().any(|k| k == c) {
            return Err(Error::column(
                input,
                c,
                "--invert-label names a column that is not kept",
            ));
        }
    }
    let transform = |b: &super::Batch| match invert_label {
        Some(c) => inverted(b, c),
        None => Ok(b.data.clone()),
    };
    match rows {
        Rows::All => super::stream_to_parquet(reader, output, progress, transform),
        Rows::Sample { n, seed } => write_sample(reader, input, output, n, seed, transform),
    }
}

/// The batch with `column` replaced by 1 - label, in the column's own type; every label must lie
/// in [0, 1], so a column that is not a binary or [0, 1] label is refused at its first bad row.
fn inverted(b: &super::Batch, column: &str) -> Result<arrow_array::RecordBatch> {
    let labels = b.labels(column)?;
    if let Some(i) = labels.iter().position(|v| !(0.0..=1.0).contains(v)) {
        return Err(Error::cell(
            &b.path,
            b.first_row + i + 1,
            column,
            format!(
                "label {} outside [0, 1]: --invert-label maps x to 1 - x",
                labels[i]
            ),
        ));
    }
    let flipped = arrow_array::Float64Array::from_iter_values(labels.iter().map(|v| 1.0 - v));
    let k = b
        .data
        .schema()
        .index_of(column)
        .map_err(|e| Error::column(&b.path, column, e))?;
    let typed = arrow_cast::cast(&flipped, b.data.column(k).data_type())
        .map_err(|e| Error::column(&b.path, column, e))?;
    let mut cols = b.data.columns().to_vec();
    cols[k] = typed;
    arrow_array::RecordBatch::try_new(b.data.schema(), cols).map_err(|e| Error::file(&b.path, e))
}

fn write_sample(
    reader: super::BatchReader,
    input: &Path,
    output: &Path,
    n: usize,
    seed: u64,
    transform: impl Fn(&super::Batch) -> Result<arrow_array::RecordBatch>,
) -> Result<usize> {
    let batches: Vec<arrow_array::RecordBatch> =
        reader.map(|b| transform(&b?)).collect::<Result<_>>()?;
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
