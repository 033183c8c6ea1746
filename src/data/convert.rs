//! Converting any supported dataset to Parquet (zstd), streamed, optionally keeping a seeded random
//! sample of rows in file order (a small labelled train set) and turning a 0/1 label around (RTE's
//! 0 = entailment becomes 1 = similar).
use super::{ColumnSpec, Format};
use crate::error::{Error, Result};
use arrow_array::{RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use indicatif::ProgressBar;
use rand::seq::index::sample;
use rand::SeedableRng;
use std::path::Path;
use std::sync::Arc;

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
    let types = match Format::from_path(input)? {
        Format::Csv | Format::Tsv => text_column_types(input, &cols)?,
        _ => Vec::new(),
    };
    let transform = |b: &super::Batch| {
        let data = typed(b, &types)?;
        match invert_label {
            Some(c) => inverted(b, c, data),
            None => Ok(data),
        }
    };
    match rows {
        Rows::All => super::stream_to_parquet(reader, output, progress, transform),
        Rows::Sample { n, seed } => write_sample(reader, input, output, n, seed, transform),
    }
}

/// CSV and TSV cells are text. A column whose every cell is an integer is stored as Int64, one
/// whose every cell is a number as Float64 (as pandas' read_csv types them), anything else as
/// text: a label arrives as a number, not the string "1". An empty cell keeps the column text,
/// and so does a cell with a leading zero ("007", a zip code or an id): as a number it would
/// silently become another string ("7") and stop matching its twin elsewhere.
fn text_column_types(input: &Path, cols: &[&str]) -> Result<Vec<DataType>> {
    let (mut int, mut num) = (vec![true; cols.len()], vec![true; cols.len()]);
    let mut rows = 0usize;
    for b in super::open(input, cols)? {
        let b = b?;
        rows += b.num_rows();
        for k in 0..cols.len() {
            if !num[k] {
                continue;
            }
            let Some(a) = b.data.column(k).as_any().downcast_ref::<StringArray>() else {
                num[k] = false;
                continue;
            };
            for v in a.iter() {
                let v = v.unwrap_or("").trim();
                // "inf", "nan" parse as floats but are words in a text column
                if !v.bytes().any(|c| c.is_ascii_digit())
                    || leading_zero(v)
                    || v.parse::<f64>().is_err()
                {
                    (int[k], num[k]) = (false, false);
                    break;
                }
                int[k] = int[k] && v.parse::<i64>().is_ok();
            }
        }
    }
    Ok((0..cols.len())
        .map(|k| match (rows > 0, int[k], num[k]) {
            (true, true, _) => DataType::Int64,
            (true, false, true) => DataType::Float64,
            _ => DataType::Utf8,
        })
        .collect())
}

/// Whether a number's digits start with a 0 that is not alone before the point ("007", "-01";
/// not "0", "0.5" or "-0.25").
fn leading_zero(v: &str) -> bool {
    let digits = v.trim_start_matches(['-', '+']).as_bytes();
    digits.len() > 1 && digits[0] == b'0' && digits[1].is_ascii_digit()
}

/// The batch's columns cast to `types` (none given: as they are).
fn typed(b: &super::Batch, types: &[DataType]) -> Result<RecordBatch> {
    if types.iter().all(|t| *t == DataType::Utf8) {
        return Ok(b.data.clone());
    }
    let schema = b.data.schema();
    let mut fields = Vec::with_capacity(types.len());
    let mut cols = Vec::with_capacity(types.len());
    for ((f, c), t) in schema.fields().iter().zip(b.data.columns()).zip(types) {
        cols.push(arrow_cast::cast(c, t).map_err(|e| Error::column(&b.path, f.name(), e))?);
        fields.push(Field::new(f.name(), t.clone(), f.is_nullable()));
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), cols).map_err(|e| Error::file(&b.path, e))
}

/// `data` (the batch as written) with `column` replaced by 1 - label, in the column's own type
/// (an integer label stays an integer); every label must lie in [0, 1], so a column that is not a
/// binary or [0, 1] label is refused at its first bad row.
fn inverted(b: &super::Batch, column: &str, data: RecordBatch) -> Result<RecordBatch> {
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
    let k = data
        .schema()
        .index_of(column)
        .map_err(|e| Error::column(&b.path, column, e))?;
    let typed = arrow_cast::cast(&flipped, data.column(k).data_type())
        .map_err(|e| Error::column(&b.path, column, e))?;
    let mut cols = data.columns().to_vec();
    cols[k] = typed;
    RecordBatch::try_new(data.schema(), cols).map_err(|e| Error::file(&b.path, e))
}

fn write_sample(
    reader: super::BatchReader,
    input: &Path,
    output: &Path,
    n: usize,
    seed: u64,
    transform: impl Fn(&super::Batch) -> Result<RecordBatch>,
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
