//! One error type for the library: every message names the file and, where it applies, the row
//! (1-based, header excluded) and the column, so a user can fix their data without a debugger.
//! Foreign errors (io, parquet, arrow, candle) are kept as the `source`, not flattened to text,
//! so a caller can still inspect them; `Display` shows the whole message on one line (the binary
//! prints only that).
use std::path::{Path, PathBuf};

/// Any error, or a plain message (`String` and `&str` convert into it).
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{}: {source}", path.display())]
    File {
        path: PathBuf,
        #[source]
        source: BoxError,
    },
    #[error("{}: column '{column}': {source}", path.display())]
    Column {
        path: PathBuf,
        column: String,
        #[source]
        source: BoxError,
    },
    #[error("{}: row {row}, column '{column}': {source}", path.display())]
    Cell {
        path: PathBuf,
        row: usize,
        column: String,
        #[source]
        source: BoxError,
    },
    /// A failure with what was being done when it happened.
    #[error("{context}: {source}")]
    Context {
        context: String,
        #[source]
        source: BoxError,
    },
    /// A tensor operation failed (shapes, devices, dtypes).
    #[error(transparent)]
    Candle(#[from] candle_core::Error),
    #[error("{0}")]
    Msg(String),
    /// The call was cancelled between two units of its work (runtime::cancel): Ctrl-C in Python.
    #[error("interrupted")]
    Interrupted,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn file(path: &Path, source: impl Into<BoxError>) -> Self {
        Error::File {
            path: path.to_path_buf(),
            source: source.into(),
        }
    }
    pub fn column(path: &Path, column: &str, source: impl Into<BoxError>) -> Self {
        Error::Column {
            path: path.to_path_buf(),
            column: column.to_string(),
            source: source.into(),
        }
    }
    pub fn cell(path: &Path, row: usize, column: &str, source: impl Into<BoxError>) -> Self {
        Error::Cell {
            path: path.to_path_buf(),
            row,
            column: column.to_string(),
            source: source.into(),
        }
    }
    pub fn context(context: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Error::Context {
            context: context.into(),
            source: source.into(),
        }
    }
    pub fn msg(msg: impl std::fmt::Display) -> Self {
        Error::Msg(msg.to_string())
    }
}

/// Attach a file name to foreign errors (io, parquet, arrow, json) at the point we know it.
pub trait Context<T> {
    fn in_file(self, path: &Path) -> Result<T>;
    /// Say what was being done: "model forward", "loading the cross-encoder", ...
    fn doing(self, what: &str) -> Result<T>;
}

impl<T, E: Into<BoxError>> Context<T> for std::result::Result<T, E> {
    fn in_file(self, path: &Path) -> Result<T> {
        self.map_err(|e| Error::file(path, e))
    }
    fn doing(self, what: &str) -> Result<T> {
        self.map_err(|e| Error::context(what, e))
    }
}
