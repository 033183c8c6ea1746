use crate::error::{Error, Result};
use std::path::Path;

/// File formats, chosen by extension so that a typo never silently parses as the wrong format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Parquet,
    ArrowIpc,
    Csv,
    Tsv,
    Jsonl,
    /// Plain text, one text a line (a dataset with one column, `text`).
    Text,
}

impl Format {
    pub fn from_path(path: &Path) -> Result<Format> {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .unwrap_or("")
            .to_ascii_lowercase();
        Ok(match ext.as_str() {
            "parquet" | "pq" => Format::Parquet,
            "arrow" | "ipc" | "feather" | "arrows" => Format::ArrowIpc,
            "csv" => Format::Csv,
            "tsv" | "tab" => Format::Tsv,
            "jsonl" | "ndjson" => Format::Jsonl,
            "txt" => Format::Text,
            _ => {
                return Err(Error::file(
                    path,
                    format!(
                        "unknown extension '{ext}': expected .parquet, .arrow/.ipc/.feather, .csv, .tsv, .jsonl or .txt (plain text, a text a line)"
                    ),
                ))
            }
        })
    }
}
