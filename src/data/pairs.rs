use super::{open, Column};
use crate::error::Result;
use std::path::Path;

/// Column names of a sentence-pair dataset; each may give several names with `|`, the first a
/// file has standing for it (`Column::pick`).
#[derive(Clone, Debug)]
pub struct PairColumns {
    pub sentence1: Column,
    pub sentence2: Column,
    pub label: Column,
}

impl std::str::FromStr for PairColumns {
    type Err = String;
    /// "sentence1,sentence2,label" as given to a --columns flag.
    fn from_str(spec: &str) -> std::result::Result<Self, String> {
        let cols: super::ColumnSpec = spec.parse()?;
        match <[Column; 3]>::try_from(cols.0) {
            Ok([a, b, l]) if !(a.optional || b.optional || l.optional) => Ok(PairColumns {
                sentence1: a,
                sentence2: b,
                label: l,
            }),
            _ => Err(format!(
                "'{spec}': expected three names, sentence1,sentence2,label"
            )),
        }
    }
}

impl std::fmt::Display for PairColumns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{},{},{}", self.sentence1, self.sentence2, self.label)
    }
}

/// `sentence1,sentence2,label|score`: sentence-transformers' trainers take a dataset's target
/// from a column named `label` or else `score` (its STSb names it `score`).
pub const DEFAULT_PAIR_COLUMNS: &str = "sentence1,sentence2,label|score";

impl Default for PairColumns {
    fn default() -> Self {
        DEFAULT_PAIR_COLUMNS.parse().expect("a well-formed default")
    }
}

impl PairColumns {
    /// The names `path` has for the three columns (sentence1, sentence2, label); a missing one
    /// is an error naming it and the file's columns.
    pub fn resolve(&self, path: &Path) -> Result<[String; 3]> {
        let have = super::column_names(path)?;
        let name = |c: &Column| c.require(path, &have).map(String::from);
        Ok([
            name(&self.sentence1)?,
            name(&self.sentence2)?,
            name(&self.label)?,
        ])
    }
}

/// A labelled sentence-pair dataset, whole (evaluation sets are small; training streams).
#[derive(Clone, Debug, Default)]
pub struct Pairs {
    pub sentence1: Vec<String>,
    pub sentence2: Vec<String>,
    pub labels: Vec<f64>,
    /// The file's name of the label column the labels came from (for messages).
    pub label_column: String,
}

impl Pairs {
    pub fn read(path: &Path, cols: &PairColumns) -> Result<Pairs> {
        let [s1, s2, label] = cols.resolve(path)?;
        let mut p = Pairs::default();
        for b in open(path, &[&s1, &s2, &label])? {
            let b = b?;
            p.sentence1
                .extend(b.texts(&s1)?.into_iter().map(String::from));
            p.sentence2
                .extend(b.texts(&s2)?.into_iter().map(String::from));
            p.labels.extend(b.labels(&label)?);
        }
        p.label_column = label;
        Ok(p)
    }

    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// The pairs as (sentence1, sentence2) references.
    pub fn pairs(&self) -> Vec<(&str, &str)> {
        self.sentence1
            .iter()
            .zip(&self.sentence2)
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect()
    }

    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }
}
