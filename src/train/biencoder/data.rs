//! A bi-encoder's training examples: the loss's text columns, tokenized, and its target column
//! (scores, class ids or teacher vectors), read as the loss spec and `--columns` say.
use crate::data::{ColumnSpec, Pairs};
use crate::error::{Error, Result};
use crate::model::SentenceEncoder;
use crate::train::losses::{LossSpec, Target};
use std::path::Path;

/// Tokenized examples: `texts[column][row]`, and per row `target_dim` target values.
#[derive(Default)]
pub struct BiData {
    pub texts: Vec<Vec<Vec<u32>>>,
    pub target: Vec<f32>,
    pub target_dim: usize,
}

impl BiData {
    pub fn len(&self) -> usize {
        self.texts.first().map_or(0, |c| c.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Read `path`'s `columns` (the loss's defaults unless given) for `spec`.
    pub fn read(
        path: &Path,
        spec: &LossSpec,
        columns: Option<&ColumnSpec>,
        enc: &SentenceEncoder,
        num_labels: usize,
    ) -> Result<BiData> {
        let spec_cols = spec.default_columns();
        let cols = columns.unwrap_or(&spec_cols);
        let names = cols.resolve(path).map_err(|e| {
            Error::context(
                format!(
                    "loss {} reads columns {cols} (name yours with --columns)",
                    spec.name
                ),
                e,
            )
        })?;
        let with_target = spec.target.has_column();
        let texts = names.len().saturating_sub(with_target as usize);
        if texts < spec.texts || (texts > spec.texts && !spec.more_texts) {
            return Err(Error::file(
                path,
                format!(
                    "loss {} reads {} text column{}{} (default columns {}), but --columns '{cols}' gives {texts}",
                    spec.name,
                    spec.texts,
                    if spec.texts == 1 { "" } else { "s" },
                    if with_target { " and a target column" } else { "" },
                    spec.columns
                ),
            ));
        }
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let target_dim = match spec.target {
            Target::None | Target::TextIds => 0,
            Target::Vector => enc.dim(),
            Target::Score | Target::Class => 1,
        };
        let mut data = BiData {
            texts: vec![Vec::new(); texts],
            target: Vec::new(),
            target_dim,
        };
        for b in crate::data::open(path, &refs)? {
            let b = b?;
            for (c, name) in names.iter().take(texts).enumerate() {
                for t in b.texts(name)? {
                    data.texts[c].push(enc.token_ids(t)?);
                }
            }
            let Some(col) = names.get(texts).filter(|_| with_target) else {
                continue;
            };
            let row = |i: usize| b.first_row + i + 1;
            match spec.target {
                Target::Vector => {
                    for (i, v) in b.vectors(col)?.into_iter().enumerate() {
                        if v.len() != target_dim {
                            return Err(Error::cell(
                                path,
                                row(i),
                                col,
                                format!(
                                    "teacher vector has {} values, the encoder's embeddings {target_dim}",
                                    v.len()
                                ),
                            ));
                        }
                        data.target.extend(v);
                    }
                }
                Target::Class | Target::Score => {
                    for (i, l) in b.labels(col)?.into_iter().enumerate() {
                        if let Some(want) = outside_domain(spec, l, num_labels) {
                            return Err(Error::cell(
                                path,
                                row(i),
                                col,
                                format!("label {l}: {want}"),
                            ));
                        }
                        data.target.push(l as f32);
                    }
                }
                Target::None | Target::TextIds => {}
            }
        }
        if data.is_empty() {
            return Err(Error::file(path, "no training examples"));
        }
        Ok(data)
    }

    /// Examples from in-memory pairs: (sentence1, sentence2) texts, the label as target.
    pub fn from_pairs(p: &Pairs, enc: &SentenceEncoder) -> Result<BiData> {
        let tok = |col: &[String]| {
            col.iter()
                .map(|t| enc.token_ids(t))
                .collect::<Result<Vec<_>>>()
        };
        let data = BiData {
            texts: vec![tok(&p.sentence1)?, tok(&p.sentence2)?],
            target: p.labels.iter().map(|&l| l as f32).collect(),
            target_dim: 1,
        };
        if data.is_empty() {
            return Err(Error::msg("no training examples"));
        }
        Ok(data)
    }
}

/// What a label outside `spec`'s domain should have been (None: it is inside): a class id below
/// the head's label count, a score in the loss's range (a cosine reaches only [-1, 1]), or at
/// least a finite value.
fn outside_domain(spec: &LossSpec, l: f64, num_labels: usize) -> Option<String> {
    match (spec.target, spec.score_range) {
        (Target::Class, _) if l.fract() != 0.0 || l < 0.0 || l as usize >= num_labels => {
            Some(format!("expected a class id in 0..{num_labels}"))
        }
        (Target::Score, Some((lo, hi))) if !(lo <= l && l <= hi) => Some(format!(
            "loss {} takes scores in [{lo}, {hi}] (normalise the labels, e.g. STS's 0-5 \
             divided by 5)",
            spec.name
        )),
        (Target::Score, None) if !l.is_finite() => Some("expected a finite score".into()),
        _ => None,
    }
}
