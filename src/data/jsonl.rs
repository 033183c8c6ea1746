//! JSON Lines through arrow-json: one object per line, the requested columns' types inferred from
//! the first lines (strings, numbers, booleans, lists such as embedding vectors), unknown keys
//! ignored. arrow-json's errors do not say where, so a failing chunk is decoded again line by line
//! and the error names the row (non-blank lines, 1-based) and the column.
use super::source::{missing_column, Inner, BATCH_ROWS};
use crate::error::{Context, Error, Result};
use arrow_json::reader::{infer_json_schema_from_iterator, Decoder, ReaderBuilder};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use serde_json::Value;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Lines read to infer column types.
const INFER_ROWS: usize = 1000;

struct Lines {
    path: PathBuf,
    input: BufReader<File>,
    row: usize,
}

impl Lines {
    fn open(path: &Path) -> Result<Lines> {
        let input = BufReader::with_capacity(1 << 20, File::open(path).in_file(path)?);
        Ok(Lines {
            path: path.to_path_buf(),
            input,
            row: 0,
        })
    }

    /// The next non-blank line (row number, bytes).
    fn next(&mut self) -> Result<Option<(usize, Vec<u8>)>> {
        loop {
            let mut buf = Vec::new();
            if self.input.read_until(b'\n', &mut buf).in_file(&self.path)? == 0 {
                return Ok(None);
            }
            if buf.iter().all(|b| b.is_ascii_whitespace()) {
                continue;
            }
            self.row += 1;
            return Ok(Some((self.row, buf)));
        }
    }
}

/// A line as a JSON object, or an error naming its row (and, for bad UTF-8, the column).
fn object(path: &Path, row: usize, line: &[u8]) -> Result<serde_json::Map<String, Value>> {
    if let Err(e) = std::str::from_utf8(line) {
        // find the key whose value holds the bad bytes: parse a lossy copy and look for U+FFFD
        let lossy = String::from_utf8_lossy(line);
        let column = serde_json::from_str::<serde_json::Map<String, Value>>(&lossy)
            .ok()
            .and_then(|m| {
                m.into_iter()
                    .find(|(_, v)| v.to_string().contains('\u{fffd}'))
                    .map(|(k, _)| k)
            });
        let msg = format!("not valid UTF-8 text ({e})");
        return Err(match column {
            Some(c) => Error::cell(path, row, &c, msg),
            None => Error::file(path, format!("row {row}: {msg}")),
        });
    }
    match serde_json::from_slice::<Value>(line) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(Error::file(path, format!("row {row}: not a JSON object"))),
        Err(e) => Err(Error::file(path, format!("row {row}: invalid JSON ({e})"))),
    }
}

pub fn column_names(path: &Path) -> Result<Vec<String>> {
    let mut lines = Lines::open(path)?;
    let (row, first) = lines
        .next()?
        .ok_or_else(|| Error::file(path, "empty dataset: no rows"))?;
    Ok(object(path, row, &first)?.keys().cloned().collect())
}

/// The requested columns' types, from the first lines (a column only ever null reads as text).
fn infer(path: &Path, columns: &[&str]) -> Result<SchemaRef> {
    let mut lines = Lines::open(path)?;
    let mut seen = Vec::new();
    while seen.len() < INFER_ROWS {
        let Some((row, line)) = lines.next()? else {
            break;
        };
        let mut obj = object(path, row, &line)?;
        let projected: serde_json::Map<String, Value> = columns
            .iter()
            .map(|c| (c.to_string(), obj.remove(*c).unwrap_or(Value::Null)))
            .collect();
        seen.push(Value::Object(projected));
    }
    let inferred = infer_json_schema_from_iterator(seen.iter().map(Ok)).in_file(path)?;
    let fields: Vec<Field> = columns
        .iter()
        .map(|c| {
            let t = inferred
                .field_with_name(c)
                .map(|f| f.data_type().clone())
                .unwrap_or(DataType::Null);
            let t = if t == DataType::Null {
                DataType::Utf8
            } else {
                t
            };
            Field::new(*c, t, true)
        })
        .collect();
    Ok(Arc::new(Schema::new(fields)))
}

pub fn read(path: &Path, columns: &[&str]) -> Result<(Inner, Option<u64>)> {
    let have = column_names(path)?;
    for c in columns {
        if !have.iter().any(|h| h == c) {
            return Err(missing_column(path, c, &have));
        }
    }
    let schema = infer(path, columns)?;
    let mut dec = decoder(&schema).in_file(path)?;
    let mut lines = Lines::open(path)?;
    let path = path.to_path_buf();
    let mut next_batch = move || -> Result<Option<arrow_array::RecordBatch>> {
        let mut chunk: Vec<(usize, Vec<u8>)> = Vec::with_capacity(BATCH_ROWS);
        while chunk.len() < BATCH_ROWS {
            match lines.next()? {
                Some(l) => chunk.push(l),
                None => break,
            }
        }
        if chunk.is_empty() {
            return Ok(None);
        }
        let decoded = (|| {
            for (_, line) in &chunk {
                dec.decode(line)?;
            }
            dec.flush()
        })();
        match decoded {
            Ok(b) => Ok(b),
            Err(e) => {
                // start the next read on a clean decoder
                dec = decoder(&schema).in_file(&path)?;
                Err(locate(&path, &chunk, &schema, e))
            }
        }
    };
    Ok((
        Box::new(std::iter::from_fn(move || next_batch().transpose())),
        None,
    ))
}

fn decoder(schema: &SchemaRef) -> std::result::Result<Decoder, arrow_schema::ArrowError> {
    ReaderBuilder::new(schema.clone())
        .with_batch_size(BATCH_ROWS)
        .build_decoder()
}

/// The row (and column) of a chunk that arrow-json refused.
fn locate(
    path: &Path,
    chunk: &[(usize, Vec<u8>)],
    schema: &SchemaRef,
    err: arrow_schema::ArrowError,
) -> Error {
    let columns: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
    let fails = |line: &[u8]| -> bool {
        decoder(schema)
            .ok()
            .map(|mut d| d.decode(line).and_then(|_| d.flush()).is_err())
            .unwrap_or(true)
    };
    for (row, line) in chunk {
        if !fails(line) {
            continue;
        }
        let obj = match object(path, *row, line) {
            Ok(o) => o,
            Err(e) => return e,
        };
        // the column: the first whose value alone fails
        for c in &columns {
            let mut alone = serde_json::Map::new();
            alone.insert(c.clone(), obj.get(c).cloned().unwrap_or(Value::Null));
            if fails(&serde_json::to_vec(&Value::Object(alone)).unwrap_or_default()) {
                let what = obj.get(c).map(kind).unwrap_or("nothing");
                let holds = schema
                    .field_with_name(c)
                    .map(|f| f.data_type().to_string())
                    .unwrap_or_default();
                return Error::cell(
                    path,
                    *row,
                    c,
                    format!("wrong type: {what} where earlier rows make the column {holds}"),
                );
            }
        }
        return Error::file(path, format!("row {row}: {err}"));
    }
    Error::file(path, err)
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}
