//! Texts of a corpus file, streamed: a dataset's text column, or a plain text file (`.txt`), one
//! text a line. Blank texts are skipped. Any other extension is the readers' unknown-extension
//! error, never a guess.
use super::Format;
use crate::error::{Error, Result};
use std::path::Path;

/// Call `f` on each non-blank text of every column in `columns` (a comma-separated list) that
/// `path` has, column after column: a pair file's sentence1 and sentence2 both feed a
/// pre-training corpus beside the text column of another. A tabular file with none of them is
/// refused naming the columns it has; plain text has its one. Returns the listed columns read
/// (None for plain text), so a caller can refuse a name that no file had (a typo).
pub fn for_each_text_of<'c>(
    path: &Path,
    columns: &'c str,
    mut f: impl FnMut(&str) -> Result<bool>,
    mut rows: impl FnMut(u64),
) -> Result<Option<Vec<&'c str>>> {
    let want: Vec<&str> = columns
        .split(',')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    if Format::from_path(path)? == Format::Text {
        for_each_text(path, super::plain_text::COLUMN, &mut f, &mut rows)?;
        return Ok(None);
    }
    let have = super::column_names(path)?;
    let found: Vec<&str> = want
        .iter()
        .copied()
        .filter(|w| have.iter().any(|h| h == w))
        .collect();
    if found.is_empty() {
        return Err(Error::file(
            path,
            format!(
                "no text column {} (has {})",
                want.join(" or "),
                have.join(", ")
            ),
        ));
    }
    for c in &found {
        for_each_text(path, c, &mut f, &mut rows)?;
    }
    Ok(Some(found))
}

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
