use super::open;
use crate::error::Result;
use std::path::Path;

/// Column names of a sentence-pair dataset.
#[derive(Clone, Debug)]
pub struct PairColumns {
    pub sentence1: String,
    pub sentence2: String,
    pub label: String,
}

impl std::str::FromStr for PairColumns {
    type Err = String;
    /// "sentence1,sentence2,label" as given to a --columns flag.
    fn from_str(spec: &str) -> std::result::Result<Self, String> {
        let cols: super::ColumnSpec = spec.parse()?;
        match cols.0.as_slice() {
            [a, b, l] if !(a.optional || b.optional || l.optional) => Ok(PairColumns {
                sentence1: a.name.clone(),
                sentence2: b.name.clone(),
                label: l.name.clone(),
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

impl Default for PairColumns {
    fn default() -> Self {
        PairColumns {
            sentence1: "sentence1".into(),
            sentence2: "sentence2".into(),
            label: "label".into(),
        }
    }
}

/// A labelled sentence-pair dataset, whole (evaluation sets are small; training streams).
#[derive(Clone, Debug, Default)]
pub struct Pairs {
    pub sentence1: Vec<String>,
    pub sentence2: Vec<String>,
    pub labels: Vec<f64>,
}

impl Pairs {
    pub fn read(path: &Path, cols: &PairColumns) -> Result<Pairs> {
        let mut p = Pairs::default();
        for b in open(path, &[&cols.sentence1, &cols.sentence2, &cols.label])? {
            let b = b?;
            p.sentence1
                .extend(b.texts(&cols.sentence1)?.into_iter().map(String::from));
            p.sentence2
                .extend(b.texts(&cols.sentence2)?.into_iter().map(String::from));
            p.labels.extend(b.labels(&cols.label)?);
        }
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
