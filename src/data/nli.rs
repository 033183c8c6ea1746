//! NLI pairs (SNLI/MultiNLI): labels as class ids 0 entailment, 1 neutral, 2 contradiction, or
//! as those words. Rows without a gold label (-1 or "-", as SNLI marks them) are dropped and counted.
use super::{open, PairColumns, Pairs};
use crate::error::{Error, Result};
use arrow_schema::DataType;
use std::path::Path;

pub const NLI_CLASSES: [&str; 3] = ["entailment", "neutral", "contradiction"];

/// The pairs with class ids as labels, and how many unlabelled rows were dropped.
pub fn read_nli(path: &Path, cols: &PairColumns) -> Result<(Pairs, usize)> {
    let mut p = Pairs::default();
    let mut dropped = 0;
    for b in open(path, &[&cols.sentence1, &cols.sentence2, &cols.label])? {
        let b = b?;
        let bad = |i: usize, m: String| Error::cell(&b.path, b.first_row + i + 1, &cols.label, m);
        let col = b.column(&cols.label)?;
        let labels: Vec<Option<f64>> = if matches!(
            col.data_type(),
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
        ) {
            let words = b.texts(&cols.label)?;
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
            b.optional_labels(&cols.label)?
                .into_iter()
                .map(|l| l.filter(|&x| x != -1.0))
                .collect()
        };
        let (s1, s2) = (b.texts(&cols.sentence1)?, b.texts(&cols.sentence2)?);
        for (i, l) in labels.into_iter().enumerate() {
            let Some(l) = l else {
                dropped += 1;
                continue;
            };
            if !(l == 0.0 || l == 1.0 || l == 2.0) {
                return Err(bad(i, format!("label {l}: expected 0 entailment, 1 neutral, 2 contradiction (or -1 for none)")));
            }
            p.sentence1.push(s1[i].to_string());
            p.sentence2.push(s2[i].to_string());
            p.labels.push(l);
        }
    }
    Ok((p, dropped))
}
