//! One streaming reader over a dataset file of any format (the extension picks the format's
//! reader), with the files' column names and row counts.
use super::batch::Batch;
use super::format::Format;
use super::source::Inner;
use super::{delimited, ipc, jsonl, parquet, plain_text};
use crate::error::{Error, Result};
use arrow_array::RecordBatch;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A streaming reader over one dataset file, restricted to the requested columns.
pub struct BatchReader {
    path: Arc<PathBuf>,
    inner: Inner,
    next_row: usize,
    done: bool,
    /// Row count when the format records it (Parquet, Arrow IPC file), for progress bars.
    pub total_rows: Option<u64>,
}

impl std::fmt::Debug for BatchReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchReader")
            .field("path", &self.path)
            .field("next_row", &self.next_row)
            .finish()
    }
}

impl BatchReader {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A reader over batches already in memory (rows built from a retrieval folder), named
    /// `path` in errors.
    pub fn from_batches(path: &Path, batches: Vec<RecordBatch>) -> BatchReader {
        let rows = batches.iter().map(|b| b.num_rows() as u64).sum();
        BatchReader {
            path: Arc::new(path.to_path_buf()),
            inner: Box::new(batches.into_iter().map(Ok)),
            next_row: 0,
            done: false,
            total_rows: Some(rows),
        }
    }
}

impl Iterator for BatchReader {
    type Item = Result<Batch>;

    fn next(&mut self) -> Option<Result<Batch>> {
        if self.done {
            return None;
        }
        loop {
            match self.inner.next() {
                Some(Ok(rb)) if rb.num_rows() == 0 => continue,
                Some(Ok(rb)) => {
                    let first_row = self.next_row;
                    self.next_row += rb.num_rows();
                    return Some(Ok(Batch {
                        path: self.path.clone(),
                        first_row,
                        data: rb,
                    }));
                }
                Some(Err(e)) => {
                    self.done = true;
                    return Some(Err(e));
                }
                None => {
                    self.done = true;
                    // an empty dataset is an error, not a silent zero: it is always a wrong path or filter
                    return (self.next_row == 0)
                        .then(|| Err(Error::file(&self.path, "empty dataset: no rows")));
                }
            }
        }
    }
}

/// Open `path` (format chosen by its extension) and stream the named columns, in that order.
/// Every requested column must exist; the error lists the columns the file has.
pub fn open(path: &Path, columns: &[&str]) -> Result<BatchReader> {
    let format = Format::from_path(path)?;
    check_file(path)?;
    let (inner, total_rows) = match format {
        Format::Parquet => parquet::read(path, columns)?,
        Format::ArrowIpc => ipc::read(path, columns)?,
        Format::Csv => delimited::read(path, columns, b',', true)?,
        Format::Tsv => delimited::read(path, columns, b'\t', false)?,
        Format::Jsonl => jsonl::read(path, columns)?,
        Format::Text => plain_text::read(path, columns)?,
    };
    Ok(BatchReader {
        path: Arc::new(path.to_path_buf()),
        inner,
        next_row: 0,
        done: false,
        total_rows,
    })
}

/// The column names a dataset file has, read from its schema or header only.
pub fn column_names(path: &Path) -> Result<Vec<String>> {
    let format = Format::from_path(path)?;
    check_file(path)?;
    match format {
        Format::Parquet => parquet::column_names(path),
        Format::ArrowIpc => ipc::column_names(path),
        Format::Csv => delimited::column_names(path, b',', true),
        Format::Tsv => delimited::column_names(path, b'\t', false),
        Format::Jsonl => jsonl::column_names(path),
        Format::Text => Ok(vec![plain_text::COLUMN.to_string()]),
    }
}

fn check_file(path: &Path) -> Result<()> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => Ok(()),
        Ok(_) => Err(Error::file(path, "not a regular file")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(Error::file(path, "no such file"))
        }
        Err(e) => Err(Error::file(path, e)),
    }
}

/// The xxh3 of a file's bytes, read a MiB at a time: a fingerprint of its content.
pub fn file_xxh3(path: &Path) -> Result<u64> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).map_err(|e| Error::file(path, e))?;
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).map_err(|e| Error::file(path, e))?;
        if n == 0 {
            return Ok(h.digest());
        }
        h.update(&buf[..n]);
    }
}

/// The number of rows of a dataset file (from Parquet/Arrow metadata where it has it).
pub fn count_rows(path: &Path) -> Result<usize> {
    let names = column_names(path)?;
    let first = names
        .first()
        .ok_or_else(|| Error::file(path, "no columns"))?;
    let reader = open(path, &[first.as_str()])?;
    match reader.total_rows {
        Some(n) => Ok(n as usize),
        None => reader.map(|b| b.map(|b| b.num_rows())).sum(),
    }
}
