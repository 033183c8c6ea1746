use super::{out, progress, split_list, ModelOpts};
use crate::data;
use crate::error::{Error, Result};
use arrow_array::{Array, ArrayRef, FixedSizeListArray, Float32Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use std::path::PathBuf;
use std::sync::Arc;

#[derive(clap::Args)]
pub struct Args {
    #[arg(long)]
    model: PathBuf,
    /// Input dataset (.parquet, .arrow, .csv, .tsv, .jsonl)
    #[arg(long)]
    input: PathBuf,
    /// Text columns to embed: one gives column `embedding`, several give `embedding_<column>`
    #[arg(long, default_value = "text")]
    columns: String,
    #[arg(long, default_value_t = 64)]
    batch_size: usize,
    /// Output .parquet: the input rows plus the embedding column(s), written atomically
    #[arg(long)]
    out: PathBuf,
    #[command(flatten)]
    model_opts: ModelOpts,
}

pub fn run(a: Args) -> Result<()> {
    let text_cols = split_list(&a.columns);
    if text_cols.is_empty() {
        return Err(Error::msg("--columns names no column"));
    }
    if data::Format::from_path(&a.out)? != data::Format::Parquet {
        return Err(Error::file(&a.out, "the output must be a .parquet file"));
    }
    let enc = a.model_opts.load(&a.model)?;
    let all = data::column_names(&a.input)?;
    for c in &text_cols {
        if !all.contains(c) {
            return Err(Error::column(
                &a.input,
                c,
                format!("missing column; the file has: {}", all.join(", ")),
            ));
        }
    }
    let cols: Vec<&str> = all.iter().map(String::as_str).collect();
    let reader = data::open(&a.input, &cols)?;
    let bar = progress::bar(reader.total_rows, "rows");
    let item = Arc::new(Field::new("item", DataType::Float32, false));
    let rows = data::stream_to_parquet(reader, &a.out, &bar, |batch| {
        let mut fields: Vec<Field> = batch
            .data
            .schema()
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        let mut arrays: Vec<ArrayRef> = batch.data.columns().to_vec();
        for c in &text_cols {
            let texts = batch.texts(c)?;
            let e = enc.encode(&texts, a.batch_size, &indicatif::ProgressBar::hidden())?;
            let values = Arc::new(Float32Array::from(e.data));
            let list = FixedSizeListArray::try_new(item.clone(), e.dim as i32, values, None)
                .map_err(|err| Error::msg(err.to_string()))?;
            let name = if text_cols.len() == 1 {
                "embedding".to_string()
            } else {
                format!("embedding_{c}")
            };
            fields.push(Field::new(name, list.data_type().clone(), false));
            arrays.push(Arc::new(list));
        }
        RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)
            .map_err(|e| Error::msg(e.to_string()))
    })?;
    bar.finish_and_clear();
    out(&format!(
        "wrote {rows} rows with {} embeddings to {}\n",
        enc.dim(),
        a.out.display()
    ));
    Ok(())
}
