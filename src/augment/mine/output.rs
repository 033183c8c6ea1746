//! Mined rows to Parquet, in sentence-transformers' layouts: `anchor, positive, negative_1..N`
//! (n-tuple: pairs that got all N) or `anchor, positive, negative` (one row per negative); with
//! scores, a `scores` list [positive, negatives...] per row as sentence-transformers writes it, and
//! for triplets a `margin` (positive minus negative: MarginMSE's target).
use super::{Mined, MinedFormat};
use crate::error::Result;
use arrow_array::builder::{Float32Builder, ListBuilder};
use arrow_array::{Array, ArrayRef, Float32Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use std::path::Path;
use std::sync::Arc;

/// (anchor, positive, negatives, scores [positive, negatives...]) per output row.
type Row<'a> = (&'a str, &'a str, Vec<&'a str>, Vec<f32>);

fn rows<'a>(m: &Mined<'a, '_>, format: MinedFormat, n: usize) -> Vec<Row<'a>> {
    let mut out = Vec::new();
    for r in &m.rows {
        if format == MinedFormat::LabeledPair {
            // the second text is the candidate; the scores column holds [label]
            let a = m.anchors[r.anchor];
            let label = |docs: &[(usize, f32)], l: f32| -> Vec<Row<'a>> {
                docs.iter()
                    .map(|&(d, _)| (a, m.corpus[d], Vec::new(), vec![l]))
                    .collect()
            };
            out.extend(label(&r.positives, 1.0));
            out.extend(label(&r.negatives, 0.0));
            continue;
        }
        for &(p, ps) in &r.positives {
            let (a, p) = (m.anchors[r.anchor], m.corpus[p]);
            match format {
                MinedFormat::NTuple if r.negatives.len() == n => {
                    let negs = r.negatives.iter().map(|&(d, _)| m.corpus[d]).collect();
                    let scores = std::iter::once(ps)
                        .chain(r.negatives.iter().map(|x| x.1))
                        .collect();
                    out.push((a, p, negs, scores));
                }
                MinedFormat::NTuple | MinedFormat::LabeledPair => {}
                MinedFormat::Triplet => out.extend(
                    r.negatives
                        .iter()
                        .map(|&(d, s)| (a, p, vec![m.corpus[d]], vec![ps, s])),
                ),
            }
        }
    }
    out
}

/// A block's mined rows as a table in the output's layout (`dest`: the output, for errors).
pub fn mined_batch(
    m: &Mined,
    format: MinedFormat,
    num_negatives: usize,
    with_scores: bool,
    dest: &Path,
) -> Result<RecordBatch> {
    let rows = rows(m, format, num_negatives);
    fn text<'a>(rows: &[Row<'a>], f: impl Fn(&Row<'a>) -> &'a str) -> ArrayRef {
        Arc::new(StringArray::from_iter_values(rows.iter().map(f)))
    }
    let mut fields = vec![
        Field::new("anchor", DataType::Utf8, false),
        Field::new("positive", DataType::Utf8, false),
    ];
    let mut cols: Vec<ArrayRef> = vec![text(&rows, |r| r.0), text(&rows, |r| r.1)];
    let names: Vec<String> = match format {
        MinedFormat::Triplet => vec!["negative".into()],
        MinedFormat::NTuple => (1..=num_negatives)
            .map(|i| format!("negative_{i}"))
            .collect(),
        MinedFormat::LabeledPair => Vec::new(),
    };
    for (i, name) in names.into_iter().enumerate() {
        fields.push(Field::new(name, DataType::Utf8, false));
        cols.push(text(&rows, |r| r.2[i]));
    }
    if format == MinedFormat::LabeledPair {
        fields.push(Field::new("label", DataType::Float32, false));
        cols.push(Arc::new(Float32Array::from_iter_values(
            rows.iter().map(|r| r.3[0]),
        )));
    } else if with_scores {
        let mut list = ListBuilder::new(Float32Builder::new());
        for r in &rows {
            list.values().append_slice(&r.3);
            list.append(true);
        }
        let list = list.finish();
        fields.push(Field::new("scores", list.data_type().clone(), true));
        cols.push(Arc::new(list));
        if format == MinedFormat::Triplet {
            fields.push(Field::new("margin", DataType::Float32, false));
            cols.push(Arc::new(Float32Array::from_iter_values(
                rows.iter().map(|r| r.3[0] - r.3[1]),
            )));
        }
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), cols)
        .map_err(|e| crate::error::Error::file(dest, e))
}
