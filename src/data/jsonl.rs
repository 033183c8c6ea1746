//! JSON Lines: one object per line. A column's Arrow type follows its values (strings -> Utf8,
//! numbers -> Float64, booleans -> Boolean); a column mixing kinds is an error naming the row.
use super::{missing_column, Inner, BATCH_ROWS};
use crate::error::{Context, Error, Result};
use arrow_array::{ArrayRef, BooleanArray, Float64Array, NullArray, RecordBatch, StringArray};
use arrow_schema::{Field, Schema};
use serde_json::{Map, Value};
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::sync::Arc;

struct Lines {
    path: PathBuf,
    input: BufReader<File>,
    row: usize,
    buf: Vec<u8>,
}

impl Lines {
    fn open(path: &Path) -> Result<Lines> {
        let input = BufReader::with_capacity(1 << 20, File::open(path).in_file(path)?);
        Ok(Lines {
            path: path.to_path_buf(),
            input,
            row: 0,
            buf: Vec::new(),
        })
    }

    /// The next non-blank line as a JSON object.
    fn next(&mut self) -> Result<Option<Map<String, Value>>> {
        loop {
            self.buf.clear();
            if self
                .input
                .read_until(b'\n', &mut self.buf)
                .in_file(&self.path)?
                == 0
            {
                return Ok(None);
            }
            if self.buf.iter().all(|b| b.is_ascii_whitespace()) {
                continue;
            }
            self.row += 1;
            let row = self.row;
            let text = std::str::from_utf8(&self.buf).map_err(|e| {
                Error::file(&self.path, format!("row {row}: not valid UTF-8 text ({e})"))
            })?;
            return match serde_json::from_str::<Value>(text) {
                Ok(Value::Object(m)) => Ok(Some(m)),
                Ok(_) => Err(Error::file(
                    &self.path,
                    format!("row {row}: not a JSON object"),
                )),
                Err(e) => Err(Error::file(
                    &self.path,
                    format!("row {row}: invalid JSON ({e})"),
                )),
            };
        }
    }
}

pub fn column_names(path: &Path) -> Result<Vec<String>> {
    let first = Lines::open(path)?
        .next()?
        .ok_or_else(|| Error::file(path, "empty dataset: no rows"))?;
    Ok(first.keys().cloned().collect())
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Kind {
    Null,
    Text,
    Number,
    Bool,
}

fn kind(v: &Value) -> Option<Kind> {
    match v {
        Value::Null => Some(Kind::Null),
        Value::String(_) => Some(Kind::Text),
        Value::Number(_) => Some(Kind::Number),
        Value::Bool(_) => Some(Kind::Bool),
        _ => None,
    }
}

fn to_array(values: &[Value], k: Kind) -> ArrayRef {
    match k {
        Kind::Null => Arc::new(NullArray::new(values.len())),
        Kind::Text => Arc::new(values.iter().map(|v| v.as_str()).collect::<StringArray>()),
        Kind::Number => Arc::new(values.iter().map(|v| v.as_f64()).collect::<Float64Array>()),
        Kind::Bool => Arc::new(values.iter().map(|v| v.as_bool()).collect::<BooleanArray>()),
    }
}

pub fn read(path: &Path, columns: &[&str]) -> Result<(Inner, Option<u64>)> {
    let have = column_names(path)?;
    for c in columns {
        if !have.iter().any(|h| h == c) {
            return Err(missing_column(path, c, &have));
        }
    }
    let columns: Vec<String> = columns.iter().map(|c| c.to_string()).collect();
    let mut lines = Lines::open(path)?;
    let mut kinds = vec![Kind::Null; columns.len()];
    let next_batch = move || -> Result<Option<RecordBatch>> {
        let mut cols: Vec<Vec<Value>> = vec![Vec::with_capacity(BATCH_ROWS); columns.len()];
        while cols[0].len() < BATCH_ROWS {
            let Some(mut obj) = lines.next()? else { break };
            for ((c, out), k) in columns.iter().zip(cols.iter_mut()).zip(kinds.iter_mut()) {
                let v = obj.remove(c).unwrap_or(Value::Null);
                let vk = kind(&v).ok_or_else(|| {
                    Error::cell(
                        &lines.path,
                        lines.row,
                        c,
                        "nested value; expected a string, number or boolean",
                    )
                })?;
                if *k == Kind::Null {
                    *k = vk;
                } else if vk != Kind::Null && vk != *k {
                    let msg = format!("wrong type: {vk:?} where earlier rows have {k:?}");
                    return Err(Error::cell(&lines.path, lines.row, c, msg));
                }
                out.push(v);
            }
        }
        if cols[0].is_empty() {
            return Ok(None);
        }
        let arrays: Vec<ArrayRef> = cols
            .iter()
            .zip(&kinds)
            .map(|(v, k)| to_array(v, *k))
            .collect();
        let fields: Vec<Field> = columns
            .iter()
            .zip(&arrays)
            .map(|(c, a)| Field::new(c, a.data_type().clone(), true))
            .collect();
        Ok(Some(
            RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays).expect("schema matches"),
        ))
    };
    let mut next_batch = next_batch;
    Ok((
        Box::new(std::iter::from_fn(move || next_batch().transpose())),
        None,
    ))
}
