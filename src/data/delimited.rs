//! CSV (RFC 4180 quoting) and TSV (no quoting, as GLUE's files are written) through the `csv`
//! crate, into Utf8 batches. Every field stays text; `Batch::labels` parses numbers and names the
//! row when one is not.
use super::source::{missing_column, Inner, BATCH_ROWS};
use crate::error::{Error, Result};
use arrow_array::{ArrayRef, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use std::fs::File;
use std::path::Path;
use std::sync::Arc;

fn reader(path: &Path, delim: u8, quoting: bool) -> Result<csv::Reader<File>> {
    csv::ReaderBuilder::new()
        .delimiter(delim)
        .quoting(quoting)
        .has_headers(true)
        .from_path(path)
        .map_err(|e| csv_error(path, e))
}

/// The csv crate's error with our row numbering (1-based, header excluded).
fn csv_error(path: &Path, e: csv::Error) -> Error {
    match e.kind() {
        csv::ErrorKind::UnequalLengths {
            pos,
            expected_len,
            len,
        } => Error::file(
            path,
            format!(
                "row {}: {len} fields, the header has {expected_len}",
                pos.as_ref().map_or(0, |p| p.record())
            ),
        ),
        _ => Error::file(path, e),
    }
}

fn header(path: &Path, rdr: &mut csv::Reader<File>) -> Result<Vec<String>> {
    let h = rdr.byte_headers().map_err(|e| csv_error(path, e))?;
    if h.is_empty() {
        return Err(Error::file(path, "empty dataset: no header row"));
    }
    h.iter()
        .map(|f| {
            String::from_utf8(f.to_vec())
                .map_err(|_| Error::file(path, "header row is not valid UTF-8"))
        })
        .collect()
}

pub fn column_names(path: &Path, delim: u8, quoting: bool) -> Result<Vec<String>> {
    header(path, &mut reader(path, delim, quoting)?)
}

pub fn read(
    path: &Path,
    columns: &[&str],
    delim: u8,
    quoting: bool,
) -> Result<(Inner, Option<u64>)> {
    let mut rdr = reader(path, delim, quoting)?;
    let names = header(path, &mut rdr)?;
    let proj = columns
        .iter()
        .map(|c| {
            names
                .iter()
                .position(|n| n == c)
                .ok_or_else(|| missing_column(path, c, &names))
        })
        .collect::<Result<Vec<usize>>>()?;
    let schema = Arc::new(Schema::new(
        columns
            .iter()
            .map(|c| Field::new(*c, DataType::Utf8, false))
            .collect::<Vec<_>>(),
    ));
    let path = path.to_path_buf();
    let mut records = rdr.into_byte_records();
    let mut row = 0usize;
    let mut next_batch = move || -> Result<Option<RecordBatch>> {
        let mut cols: Vec<Vec<String>> = vec![Vec::with_capacity(BATCH_ROWS); proj.len()];
        while cols[0].len() < BATCH_ROWS {
            let Some(rec) = records.next() else { break };
            let rec = rec.map_err(|e| csv_error(&path, e))?;
            row += 1;
            for (out, &i) in cols.iter_mut().zip(&proj) {
                let text = String::from_utf8(rec[i].to_vec()).map_err(|e| {
                    Error::cell(&path, row, &names[i], format!("not valid UTF-8 text ({e})"))
                })?;
                out.push(text);
            }
        }
        if cols[0].is_empty() {
            return Ok(None);
        }
        let arrays: Vec<ArrayRef> = cols
            .into_iter()
            .map(|c| Arc::new(StringArray::from(c)) as ArrayRef)
            .collect();
        Ok(Some(
            RecordBatch::try_new(schema.clone(), arrays).expect("schema matches"),
        ))
    };
    Ok((
        Box::new(std::iter::from_fn(move || next_batch().transpose())),
        None,
    ))
}
