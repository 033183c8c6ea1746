//! What an overlap run reads (datasets and their text columns) and how it counts (n-gram size,
//! stride, exact sets or MinHash).
use crate::data::{self, ColumnSpec};
use crate::error::{Error, Result};
use std::path::PathBuf;

/// One dataset: its name in the report, its file, and the text columns whose rows count.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Source {
    pub name: String,
    pub path: PathBuf,
    pub columns: Vec<String>,
}

impl Source {
    /// A dataset and its text columns: `columns` when given, else sentence1 and sentence2 for pair
    /// data, else text.
    pub fn new(name: String, path: PathBuf, columns: Option<&ColumnSpec>) -> Result<Source> {
        let columns = match columns {
            Some(c) => c.resolve(&path)?,
            None => {
                let have = data::column_names(&path)?;
                let has = |c: &str| have.iter().any(|h| h == c);
                if has("sentence1") && has("sentence2") {
                    vec!["sentence1".into(), "sentence2".into()]
                } else if has("text") {
                    vec!["text".into()]
                } else {
                    return Err(Error::file(
                        &path,
                        format!(
                            "no sentence1/sentence2 or text column (has: {}); name them with --columns",
                            have.join(", ")
                        ),
                    ));
                }
            }
        };
        Ok(Source {
            name,
            path,
            columns,
        })
    }
}

#[derive(Clone, Copy, Debug, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    Exact,
    /// MinHash with this many permutations and hash seed.
    Approx {
        num_perm: usize,
        seed: u64,
    },
}

#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct Options {
    pub ngram: usize,
    pub stride: usize,
    pub mode: Mode,
}
