//! Pairs labelled with classes. NLI pairs (SNLI/MultiNLI) name them as ids 0 entailment, 1 neutral,
//! 2 contradiction, or as those words; rows without a gold label (-1 or "-", as SNLI marks them)
//! are dropped and counted. Other class data uses ids 0..n.
use super::{open, PairColumns, Pairs};
use crate::error::{Error, Result};
use arrow_schema::DataType;
use std::path::Path;

pub const NLI_CLASSES: [&str; 3] = ["entailment", "neutral", "contradiction"];

/// NLI pairs with class ids 0..3 as labels, and how many unlabelled rows were dropped.
pub fn read_nli(path: &Path, cols: &PairColumns) -> Result<(Pairs, usize)> {
    read(path, cols, Some(3))
}

/// Pairs labelled with any class id (non-negative integers, or NLI's words), and how many
/// unlabelled rows were dropped.
pub fn read_classes(path: &Path, cols: &PairColumns) -> Result<(Pairs, usize)> {
    read(path, cols, None)
}

/// The entailment pairs (label 0): MNR's (anchor, positive) pairs from NLI data.
pub fn entailments(p: &Pairs) -> Pairs {
    let mut e = Pairs::default();
    for i in (0..p.len()).filter(|&i| p.labels[i] == 0.0) {
        e.sentence1.push(p.sentence1[i].clone());
        e.sentence2.push(p.sentence2[i].clone());
        e.labels.push(0.0);
    }
    e
}

fn read(path: &Path, cols: &PairColumns, classes: Option<usize>) -> Result<(Pairs, usize)> {
    let [s1, s2, label] = cols.resolve(path)?;
    let mut p = Pairs::default();
    let mut dropped = 0;
    for b in open(path, &[&s1, &s2, &label])? {
        let b = b?;
        let bad = |i: usize, m: String| Error::cell(&b.path, b.first_row + i + 1, &label, m);
        let col = b.column(&label)?;
        let labels: Vec<Option<f64>> = if matches!(
            col.data_type(),
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
        ) {
            let words = b.texts(&label)?;
            let mut v = Vec::with_capacity(words.len());
            for (i, w) in words.iter().enumerate() {
                let w = w.trim().to_ascii_lowercase();
                v.push(match NLI_CLASSES.iter().position(|c| *c == w) {
                    Some(k) => Some(k as f64),
                    None if w == "-" || w == "-1" => None,
                    None if w.parse::<f64>().is_ok() => Some(w.parse().unwrap()),
                    None => return Err(bad(i, format!("label '{w}': expected entailment, neutral, contradiction, 0, 1, 2, -1 or -"))),
                });
            }
            v
        } else {
            b.optional_labels(&label)?
                .into_iter()
                .map(|l| l.filter(|&x| x != -1.0))
                .collect()
        };
        let (t1, t2) = (b.texts(&s1)?, b.texts(&s2)?);
        for (i, l) in labels.into_iter().enumerate() {
            let Some(l) = l else {
                dropped += 1;
                continue;
            };
            let ok = l.fract() == 0.0 && l >= 0.0 && classes.is_none_or(|n| (l as usize) < n);
            if !ok {
                return Err(bad(i, match classes {
                    Some(3) => format!("label {l}: expected 0 entailment, 1 neutral, 2 contradiction (or -1 for none)"),
                    _ => format!("label {l}: expected a class id (0, 1, ...), or -1 for none"),
                }));
            }
            p.sentence1.push(t1[i].to_string());
            p.sentence2.push(t2[i].to_string());
            p.labels.push(l);
        }
    }
    p.label_column = label;
    Ok((p, dropped))
}
