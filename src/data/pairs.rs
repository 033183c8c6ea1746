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

impl PairColumns {
    /// "sentence1,sentence2,label" as given to a --columns flag.
    pub fn parse(spec: &str) -> Result<PairColumns> {
        let names: Vec<&str> = spec
            .split(',')
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect();
        match names.as_slice() {
            [a, b, l] => Ok(PairColumns {
                sentence1: a.to_string(),
                sentence2: b.to_string(),
                label: l.to_string(),
            }),
            _ => Err(crate::error::Error::msg(format!(
                "--columns '{spec}': expected three names, sentence1,sentence2,label"
            ))),
        }
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

    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }
}
