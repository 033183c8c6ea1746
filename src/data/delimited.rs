//! CSV (RFC 4180 quoting) and TSV (no quoting, as GLUE's files are written) into Utf8 batches.
//! Every field stays text; `Batch::labels` parses numbers and names the row when one is not.
use super::{missing_column, Inner, BATCH_ROWS};
use crate::error::{Context, Error, Result};
use arrow_array::{ArrayRef, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::sync::Arc;

struct Records {
    path: PathBuf,
    input: BufReader<File>,
    delim: u8,
    quoting: bool,
    line: Vec<u8>,
}

impl Records {
    fn open(path: &Path, delim: u8, quoting: bool) -> Result<Records> {
        let input = BufReader::with_capacity(1 << 20, File::open(path).in_file(path)?);
        Ok(Records {
            path: path.to_path_buf(),
            input,
            delim,
            quoting,
            line: Vec::new(),
        })
    }

    fn read_line(&mut self) -> Result<bool> {
        self.line.clear();
        Ok(self
            .input
            .read_until(b'\n', &mut self.line)
            .in_file(&self.path)?
            > 0)
    }

    /// The next record's raw fields, or None at end of file. `row` is for error messages.
    fn next(&mut self, row: usize) -> Result<Option<Vec<Vec<u8>>>> {
        if !self.read_line()? {
            return Ok(None);
        }
        let mut fields = vec![Vec::new()];
        let mut in_quotes = false;
        loop {
            let line = std::mem::take(&mut self.line);
            let mut i = 0;
            while i < line.len() {
                let b = line[i];
                let field = fields.last_mut().unwrap();
                if in_quotes {
                    if b == b'"' && line.get(i + 1) == Some(&b'"') {
                        field.push(b'"');
                        i += 1;
                    } else if b == b'"' {
                        in_quotes = false;
                    } else {
                        field.push(b); // line breaks inside quotes belong to the field
                    }
                } else if b == b'\n' || b == b'\r' {
                    // the record's line ending
                } else if b == self.delim {
                    fields.push(Vec::new());
                } else if b == b'"' && self.quoting && field.is_empty() {
                    in_quotes = true;
                } else {
                    field.push(b);
                }
                i += 1;
            }
            if !in_quotes {
                return Ok(Some(fields));
            }
            self.line = line;
            if !self.read_line()? {
                return Err(Error::file(
                    &self.path,
                    format!("row {row}: unterminated quoted field at end of file"),
                ));
            }
        }
    }
}

fn header(path: &Path, rec: &mut Records) -> Result<Vec<String>> {
    let fields = rec
        .next(0)?
        .ok_or_else(|| Error::file(path, "empty dataset: no header row"))?;
    fields
        .into_iter()
        .map(|f| {
            String::from_utf8(f).map_err(|_| Error::file(path, "header row is not valid UTF-8"))
        })
        .collect()
}

pub fn column_names(path: &Path, delim: u8, quoting: bool) -> Result<Vec<String>> {
    header(path, &mut Records::open(path, delim, quoting)?)
}

struct Batches {
    rec: Records,
    names: Vec<String>,
    width: usize,
    proj: Vec<usize>,
    schema: Arc<Schema>,
    row: usize,
}

impl Batches {
    fn next_batch(&mut self) -> Result<Option<RecordBatch>> {
        let mut cols: Vec<Vec<String>> = vec![Vec::with_capacity(BATCH_ROWS); self.proj.len()];
        while cols[0].len() < BATCH_ROWS {
            let row = self.row + 1;
            let Some(fields) = self.rec.next(row)? else {
                break;
            };
            if fields.len() == 1 && fields[0].is_empty() {
                continue; // blank line
            }
            self.row = row;
            if fields.len() != self.width {
                let msg = format!(
                    "row {row}: {} fields, the header has {}",
                    fields.len(),
                    self.width
                );
                return Err(Error::file(&self.rec.path, msg));
            }
            for (out, &i) in cols.iter_mut().zip(&self.proj) {
                let text = String::from_utf8(fields[i].clone()).map_err(|e| {
                    Error::cell(
                        &self.rec.path,
                        row,
                        &self.names[i],
                        format!("not valid UTF-8 text ({e})"),
                    )
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
            RecordBatch::try_new(self.schema.clone(), arrays).expect("schema matches"),
        ))
    }
}

pub fn read(
    path: &Path,
    columns: &[&str],
    delim: u8,
    quoting: bool,
) -> Result<(Inner, Option<u64>)> {
    let mut rec = Records::open(path, delim, quoting)?;
    let names = header(path, &mut rec)?;
    let mut proj = Vec::with_capacity(columns.len());
    for c in columns {
        proj.push(
            names
                .iter()
                .position(|n| n == c)
                .ok_or_else(|| missing_column(path, c, &names))?,
        );
    }
    let schema = Arc::new(Schema::new(
        columns
            .iter()
            .map(|c| Field::new(*c, DataType::Utf8, false))
            .collect::<Vec<_>>(),
    ));
    let mut b = Batches {
        rec,
        width: names.len(),
        names,
        proj,
        schema,
        row: 0,
    };
    let iter = std::iter::from_fn(move || b.next_batch().transpose());
    Ok((Box::new(iter), None))
}
