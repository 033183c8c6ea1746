use super::{out, progress, split_list};
use crate::augment::{random_pairs, Bm25};
use crate::data::{self, ParquetSink};
use crate::error::{Error, Result};
use crate::model::cross_encoder::{load_cross_encoder, predict};
use arrow_array::{ArrayRef, Float32Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use std::path::PathBuf;
use std::sync::Arc;

#[derive(clap::Args)]
pub struct Args {
    /// A trained cross-encoder folder (from train-cross-encoder or any BertForSequenceClassification)
    #[arg(long)]
    cross_encoder: PathBuf,
    /// Pairs: sentence1, sentence2 and, where known, label
    #[arg(long)]
    input: PathBuf,
    /// random (AugSBERT's), bm25 (its stronger strategy) or none (only label the input)
    #[arg(long, default_value = "random")]
    sample: String,
    /// New partners per sentence
    #[arg(long, default_value_t = 3)]
    top_k: usize,
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Columns sentence1,sentence2[,label]; without a label column every row is unlabelled target
    #[arg(long, default_value = "sentence1,sentence2,label")]
    columns: String,
    /// Label the input's gold pairs with the cross-encoder too
    #[arg(long)]
    relabel_gold: bool,
    /// Ignore the input's labels: all rows are unlabelled target data (domain transfer)
    #[arg(long)]
    unlabeled: bool,
    #[arg(long, default_value_t = 64)]
    batch_size: usize,
    /// cpu, cuda or cuda:N (CUDA needs a build with the `cuda` feature)
    #[arg(long, default_value = "cpu")]
    device: String,
    /// Output .parquet: sentence1, sentence2, label (Float32), origin (gold|target|sampled)
    #[arg(long)]
    out: PathBuf,
}

pub fn run(a: Args) -> Result<()> {
    let cols = split_list(&a.columns);
    if cols.len() < 2 || cols.len() > 3 {
        return Err(Error::msg("--columns takes sentence1,sentence2[,label]"));
    }
    let has_label =
        cols.len() == 3 && !a.unlabeled && data::column_names(&a.input)?.contains(&cols[2]);
    let want: Vec<&str> = cols
        .iter()
        .take(if has_label { 3 } else { 2 })
        .map(String::as_str)
        .collect();
    let (mut s1, mut s2, mut gold) = (Vec::new(), Vec::new(), Vec::new());
    for b in data::open(&a.input, &want)? {
        let b = b?;
        s1.extend(b.texts(&cols[0])?.into_iter().map(String::from));
        s2.extend(b.texts(&cols[1])?.into_iter().map(String::from));
        gold.extend(if has_label {
            b.optional_labels(&cols[2])?
        } else {
            vec![None; b.num_rows()]
        });
    }
    let (r1, r2): (Vec<&str>, Vec<&str>) = (
        s1.iter().map(String::as_str).collect(),
        s2.iter().map(String::as_str).collect(),
    );
    let sampled = match a.sample.as_str() {
        "random" => random_pairs(&r1, &r2, a.top_k, a.seed),
        "bm25" => Bm25::sample(&r1, &r2, a.top_k),
        "none" => Vec::new(),
        s => {
            return Err(Error::msg(format!(
                "--sample '{s}': expected random, bm25 or none"
            )))
        }
    };
    let device = crate::runtime::device(&a.device)?;
    let (model, tok) = load_cross_encoder(&a.cross_encoder, &device)?;
    // every row: (s1, s2, gold label if kept, origin)
    let mut rows: Vec<(&str, &str, Option<f64>, &str)> =
        Vec::with_capacity(r1.len() + sampled.len());
    for i in 0..r1.len() {
        let origin = if gold[i].is_some() { "gold" } else { "target" };
        rows.push((r1[i], r2[i], gold[i].filter(|_| !a.relabel_gold), origin));
    }
    rows.extend(sampled.iter().map(|&(x, y)| (x, y, None, "sampled")));
    let todo: Vec<usize> = (0..rows.len()).filter(|&i| rows[i].2.is_none()).collect();
    let pairs: Vec<(&str, &str)> = todo.iter().map(|&i| (rows[i].0, rows[i].1)).collect();
    let bar = progress::bar(Some(pairs.len() as u64), "pairs labelled");
    let scores = predict(&model, &tok, &pairs, a.batch_size, &device, &bar)?;
    bar.finish_and_clear();
    let mut labels: Vec<f32> = rows.iter().map(|r| r.2.unwrap_or(0.0) as f32).collect();
    for (&i, s) in todo.iter().zip(&scores) {
        // one label: the score; classes: the most probable class id
        labels[i] = if s.len() == 1 {
            s[0]
        } else {
            s.iter()
                .enumerate()
                .max_by(|x, y| x.1.total_cmp(y.1))
                .map_or(0, |m| m.0) as f32
        };
    }
    let schema = Arc::new(Schema::new(vec![
        Field::new("sentence1", DataType::Utf8, false),
        Field::new("sentence2", DataType::Utf8, false),
        Field::new("label", DataType::Float32, false),
        Field::new("origin", DataType::Utf8, false),
    ]));
    let arrays: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(
            rows.iter().map(|r| r.0).collect::<Vec<_>>(),
        )),
        Arc::new(StringArray::from(
            rows.iter().map(|r| r.1).collect::<Vec<_>>(),
        )),
        Arc::new(Float32Array::from(labels)),
        Arc::new(StringArray::from(
            rows.iter().map(|r| r.3).collect::<Vec<_>>(),
        )),
    ];
    let rb = RecordBatch::try_new(schema.clone(), arrays).map_err(|e| Error::msg(e.to_string()))?;
    let mut sink = ParquetSink::create(&a.out, schema)?;
    sink.write(&rb)?;
    sink.finish()?;
    let count = |o: &str| rows.iter().filter(|r| r.3 == o).count();
    out(&format!(
        "wrote {} pairs ({} gold, {} target, {} sampled; {} labelled by the cross-encoder) to {}\n",
        rows.len(),
        count("gold"),
        count("target"),
        count("sampled"),
        todo.len(),
        a.out.display()
    ));
    Ok(())
}
