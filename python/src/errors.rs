//! condenser's errors as the Python exceptions a Python user expects, each carrying the CLI's
//! message: FileNotFoundError for a path that is not there (a model name no folder answers
//! included), PermissionError / OSError for other I/O failures, ValueError for bad input named
//! by file, row and column, KeyboardInterrupt for a cancelled call, RuntimeError otherwise.
use condenser::Error;
use pyo3::exceptions::{
    PyFileNotFoundError, PyKeyboardInterrupt, PyOSError, PyPermissionError, PyRuntimeError,
    PyValueError,
};
use pyo3::PyErr;

/// The first I/O error in `e`'s chain of sources.
fn io_kind(e: &(dyn std::error::Error + 'static)) -> Option<std::io::ErrorKind> {
    let mut cur = Some(e);
    while let Some(x) = cur {
        if let Some(io) = x.downcast_ref::<std::io::Error>() {
            return Some(io.kind());
        }
        cur = x.source();
    }
    None
}

pub fn to_py(e: Error) -> PyErr {
    let msg = e.to_string();
    let io = match &e {
        Error::File { source, .. } | Error::Context { source, .. } => io_kind(source.as_ref()),
        _ => None,
    };
    match (&e, io) {
        (Error::Interrupted, _) => PyKeyboardInterrupt::new_err(msg),
        (_, Some(std::io::ErrorKind::NotFound)) => PyFileNotFoundError::new_err(msg),
        (_, Some(std::io::ErrorKind::PermissionDenied)) => PyPermissionError::new_err(msg),
        (_, Some(_)) => PyOSError::new_err(msg),
        // a folder or file that is not there, said in the library's own words (a model name no
        // installed folder answers, a retrieval folder without its corpus)
        (Error::File { path, .. }, None) if !path.exists() => PyFileNotFoundError::new_err(msg),
        (Error::File { .. } | Error::Column { .. } | Error::Cell { .. }, None) => {
            PyValueError::new_err(msg)
        }
        _ => PyRuntimeError::new_err(msg),
    }
}
