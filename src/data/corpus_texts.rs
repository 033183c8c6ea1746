//! Texts of a corpus file, streamed: a dataset's text column, or a plain text file (`.txt`), one
//! text a line. Blank texts are skipped. Any other extension is the readers' unknown-extension
//! error, never a guess.
use super::Format;
use crate::error::Result;
use std::path::Path;

/// Call `f` on each non-blank text of `path` until it returns false; `rows(n)` after every n rows
/// read (progress). `column` names the text column of tabular files (plain text has one).
pub fn for_each_text(
    path: &Path,
    column: &str,
    mut f: impl FnMut(&str) -> Result<bool>,
    mut rows: impl FnMut(u64),
) -> Result<()> {
    let column = match Format::from_path(path)? {
        Format::Text => super::plain_text::COLUMN,
        _ => column,
    };
    for b in super::open(path, &[column])? {
        let b = b?;
        for t in b.texts(column)? {
            if !t.trim().is_empty() && !f(t)? {
                return Ok(());
            }
        }
        rows(b.num_rows() as u64);
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
