//! Encoding a dataset file: every input row with its embedding column(s) added, streamed block by
//! block (global blocks of `shard::BLOCK` rows, so a shard's rows are embedded exactly as in a
//! whole run) into a Parquet file renamed into place at the end.
use crate::data::{self, ColumnSpec};
use crate::error::{Error, Result};
use crate::model::SentenceEncoder;
use crate::shard::{ShardRun, BLOCK};
use arrow_array::{Array, ArrayRef, FixedSizeListArray, Float32Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use indicatif::ProgressBar;
use std::path::Path;
use std::sync::Arc;

/// The embedding column for text column `c`: `embedding` when one column is encoded,
/// `embedding_<c>` for several.
pub fn embedding_column(c: &str, columns: usize) -> String {
    if columns == 1 {
        "embedding".to_string()
    } else {
        format!("embedding_{c}")
    }
}

/// Encode `columns` of `input` into `out` (Parquet), or only a shard's rows into the shard's
/// file; returns the rows written and the file. `progress` counts rows.
pub fn encode_file(
    enc: &SentenceEncoder,
    input: &Path,
    columns: &ColumnSpec,
    batch_size: usize,
    out: &Path,
    shard: Option<&ShardRun>,
    progress: &ProgressBar,
) -> Result<(usize, std::path::PathBuf)> {
    if columns.is_empty() {
        return Err(Error::msg("--columns names no column"));
    }
    if data::Format::from_path(out)? != data::Format::Parquet {
        return Err(Error::file(out, "the output must be a .parquet file"));
    }
    let text_cols = columns.resolve(input)?;
    let all = data::column_names(input)?;
    let cols: Vec<&str> = all.iter().map(String::as_str).collect();
    let reader = data::open(input, &cols)?;
    // a whole run reads to the end (no counting pass); a shard needs the count for its range
    let (total, range) = match shard {
        Some(s) => {
            let total = data::count_rows(input)?;
            let range = s.shard.rows(total);
            progress.set_length(range.len() as u64);
            (total, range)
        }
        None => {
            progress.set_length(reader.total_rows.unwrap_or(0));
            (0, 0..usize::MAX)
        }
    };
    let dest = shard.map_or(out.to_path_buf(), |s| s.shard.file(out));
    let mut written = 0;
    let item = Arc::new(Field::new("item", DataType::Float32, false));
    let mut sink: Option<data::ParquetSink> = None;
    for batch in data::blocks(reader, range.clone(), BLOCK) {
        let batch = batch?;
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
            let e = enc.encode(&texts, batch_size, &ProgressBar::hidden())?;
            let values = Arc::new(Float32Array::from(e.data));
            let list = FixedSizeListArray::try_new(item.clone(), e.dim as i32, values, None)
                .map_err(|err| Error::file(out, err))?;
            fields.push(Field::new(
                embedding_column(c, text_cols.len()),
                list.data_type().clone(),
                false,
            ));
            arrays.push(Arc::new(list));
        }
        let rb = RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)
            .map_err(|e| Error::file(out, e))?;
        if sink.is_none() {
            sink = Some(data::ParquetSink::create(&dest, rb.schema())?);
        }
        sink.as_mut().expect("created").write(&rb)?;
        progress.inc(batch.num_rows() as u64);
        written += batch.num_rows();
    }
    let wrote = sink.is_some();
    if let Some(s) = sink {
        s.finish()?;
    }
    if let Some(s) = shard {
        s.finish("encode", &dest, total, range.clone(), wrote)?;
    }
    Ok((written, dest))
}
