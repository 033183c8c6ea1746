//! Plain text (`.txt`): one text a line, read as a dataset with one column, `text`. Blank lines
//! are skipped, so row numbers count the non-blank lines.
use super::source::{missing_column, Inner, BATCH_ROWS};
use crate::error::{Context, Error, Result};
use arrow_array::{ArrayRef, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use std::io::BufRead;
use std::path::Path;
use std::sync::Arc;

pub const COLUMN: &str = "text";

pub fn read(path: &Path, columns: &[&str]) -> Result<(Inner, Option<u64>)> {
    if let Some(c) = columns.iter().find(|c| **c != COLUMN) {
        return Err(missing_column(path, c, &[COLUMN.to_string()]));
    }
    let schema = Arc::new(Schema::new(vec![Field::new(COLUMN, DataType::Utf8, false)]));
    let file = std::fs::File::open(path).in_file(path)?;
    let mut lines = std::io::BufReader::with_capacity(1 << 20, file).split(b'\n');
    let (path, mut row) = (path.to_path_buf(), 0usize);
    let mut next_batch = move || -> Result<Option<RecordBatch>> {
        let mut texts: Vec<String> = Vec::with_capacity(BATCH_ROWS);
        while texts.len() < BATCH_ROWS {
            let Some(line) = lines.next() else { break };
            let line = line.in_file(&path)?;
            let text = String::from_utf8(line).map_err(|e| {
                Error::cell(
                    &path,
                    row + 1,
                    COLUMN,
                    format!("not valid UTF-8 text ({e})"),
                )
            })?;
            let text = text.trim();
            if !text.is_empty() {
                row += 1;
                texts.push(text.to_string());
            }
        }
        if texts.is_empty() {
            return Ok(None);
        }
        let arrays: Vec<ArrayRef> = vec![Arc::new(StringArray::from(texts))];
        Ok(Some(
            RecordBatch::try_new(schema.clone(), arrays).expect("schema matches"),
        ))
    };
    Ok((
        Box::new(std::iter::from_fn(move || next_batch().transpose())),
        None,
    ))
}
