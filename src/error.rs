//! One error type for the library: every message names the file and, where it applies, the row
//! (1-based, header excluded) and the column, so a user can fix their data without a debugger.
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{}: {msg}", path.display())]
    File { path: PathBuf, msg: String },
    #[error("{}: column '{column}': {msg}", path.display())]
    Column {
        path: PathBuf,
        column: String,
        msg: String,
    },
    #[error("{}: row {row}, column '{column}': {msg}", path.display())]
    Cell {
        path: PathBuf,
        row: usize,
        column: String,
        msg: String,
    },
    #[error("{0}")]
    Msg(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn file(path: &Path, msg: impl std::fmt::Display) -> Self {
        Error::File {
            path: path.to_path_buf(),
            msg: msg.to_string(),
        }
    }
    pub fn column(path: &Path, column: &str, msg: impl std::fmt::Display) -> Self {
        Error::Column {
            path: path.to_path_buf(),
            column: column.to_string(),
            msg: msg.to_string(),
        }
    }
    pub fn cell(path: &Path, row: usize, column: &str, msg: impl std::fmt::Display) -> Self {
        Error::Cell {
            path: path.to_path_buf(),
            row,
            column: column.to_string(),
            msg: msg.to_string(),
        }
    }
    pub fn msg(msg: impl std::fmt::Display) -> Self {
        Error::Msg(msg.to_string())
    }
}

/// Attach a file name to foreign errors (io, parquet, arrow, json) at the point we know it.
pub trait Context<T> {
    fn in_file(self, path: &Path) -> Result<T>;
}

impl<T, E: std::fmt::Display> Context<T> for std::result::Result<T, E> {
    fn in_file(self, path: &Path) -> Result<T> {
        self.map_err(|e| Error::file(path, e))
    }
}
