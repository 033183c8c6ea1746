//! What every format's reader hands the dataset reader: record batches of at most BATCH_ROWS rows,
//! and one error for a column the file lacks.
use crate::error::{Error, Result};
use arrow_array::RecordBatch;
use std::path::Path;

/// Rows per record batch: large enough to amortize per-batch work, small enough that a huge file
/// streams in bounded memory.
pub const BATCH_ROWS: usize = 8192;

/// A format reader's batches.
pub(crate) type Inner = Box<dyn Iterator<Item = Result<RecordBatch>> + Send>;

/// The error for a requested column the file lacks.
pub(crate) fn missing_column(path: &Path, column: &str, have: &[String]) -> Error {
    Error::column(
        path,
        column,
        format!("missing column; the file has: {}", have.join(", ")),
    )
}
