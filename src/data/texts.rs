//! Texts of a corpus file, streamed: a dataset's text column, or any other file as plain text,
//! one text a line. Blank texts are skipped.
use super::Format;
use crate::error::{Error, Result};
use std::io::BufRead;
use std::path::Path;

/// Call `f` on each non-blank text of `path` until it returns false; `rows(n)` after every n rows
/// read (progress).
pub fn for_each_text(
    path: &Path,
    column: &str,
    mut f: impl FnMut(&str) -> Result<bool>,
    mut rows: impl FnMut(u64),
) -> Result<()> {
    if Format::from_path(path).is_ok() {
        for b in super::open(path, &[column])? {
            let b = b?;
            for t in b.texts(column)? {
                if !t.trim().is_empty() && !f(t)? {
                    return Ok(());
                }
            }
            rows(b.num_rows() as u64);
        }
        return Ok(());
    }
    let file = std::fs::File::open(path).map_err(|e| Error::file(path, e))?;
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| Error::file(path, format!("line {}: {e}", i + 1)))?;
        if !line.trim().is_empty() && !f(line.trim())? {
            return Ok(());
        }
        rows(1);
    }
    Ok(())
}

/// The first `limit` non-blank texts of `path` (all when None).
pub fn read_texts(path: &Path, column: &str, limit: Option<usize>) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let stop = limit.unwrap_or(usize::MAX);
    if stop > 0 {
        for_each_text(
            path,
            column,
            |t| {
                out.push(t.to_string());
                Ok(out.len() < stop)
            },
            |_| {},
        )?;
    }
    Ok(out)
}
