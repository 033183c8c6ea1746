//! Encoding a dataset file: every input row with its embedding column(s) added, streamed block by
//! block (global blocks of `shard::BLOCK` rows, so a shard's rows are embedded exactly as in a
//! whole run) into a Parquet file renamed into place at the end. The file's schema records how the
//! vectors were made (search/store.rs), so that `mine`, `evaluate` and `search` can take them as input
//! and refuse them for another model. A retrieval folder as input encodes its corpus as retrieval
//! reads it (id, "title text").
use crate::data::{self, retrieval, ColumnSpec};
use crate::error::{Error, Result};
use crate::model::SentenceEncoder;
use crate::search::EmbeddingsMeta;
use crate::shard::parts::{self, Parts, Resume};
use crate::shard::{ShardRun, BLOCK};
use arrow_array::{Array, ArrayRef, FixedSizeListArray, Float32Array, RecordBatch, StringArray};
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

/// A retrieval folder's corpus as (id, text) rows, text as retrieval and mining read it.
fn corpus_reader(dir: &Path, columns: &ColumnSpec) -> Result<(data::BatchReader, Vec<String>)> {
    if columns.to_string() != "text" {
        return Err(Error::file(
            dir,
            "a retrieval folder is encoded as its corpus's text (\"title text\"): leave --columns out",
        ));
    }
    let path = retrieval::find_file(dir, "corpus")?;
    let docs = retrieval::read_texts(&path)?;
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("text", DataType::Utf8, false),
    ]));
    let batches = docs
        .chunks(data::BATCH_ROWS)
        .map(|c| {
            let ids = StringArray::from_iter_values(c.iter().map(|d| d.0.as_str()));
            let texts = StringArray::from_iter_values(c.iter().map(|d| d.1.as_str()));
            RecordBatch::try_new(schema.clone(), vec![Arc::new(ids), Arc::new(texts)])
                .map_err(|e| Error::file(&path, e))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((
        data::BatchReader::from_batches(&path, batches),
        vec!["text".into()],
    ))
}

/// Encode `columns` of `input` (a dataset file, or a retrieval folder's corpus) with the model in
/// folder `model` into `out` (Parquet), or only a shard's rows into the shard's file; returns the
/// rows written and the file. `resume`: the run's settings (`shard::settings`: flags and the
/// model's fingerprint), which an interrupted run's parts must share to be resumed (shard::parts).
/// `progress` counts rows. `prompt` goes before every text (`Prompts::resolve`; for a retrieval
/// folder's corpus `Prompts::document`).
#[allow(clippy::too_many_arguments)]
pub fn encode_file(
    enc: &SentenceEncoder,
    model: &Path,
    input: &Path,
    columns: &ColumnSpec,
    prompt: Option<&str>,
    batch_size: usize,
    out: &Path,
    shard: Option<&ShardRun>,
    resume: &Resume,
    progress: &ProgressBar,
) -> Result<(usize, std::path::PathBuf)> {
    if columns.is_empty() {
        return Err(Error::msg("--columns names no column"));
    }
    if data::Format::from_path(out)? != data::Format::Parquet {
        return Err(Error::file(out, "the output must be a .parquet file"));
    }
    let (reader, text_cols) = if input.is_dir() {
        corpus_reader(input, columns)?
    } else {
        let all = data::column_names(input)?;
        let cols: Vec<&str> = all.iter().map(String::as_str).collect();
        (data::open(input, &cols)?, columns.resolve(input)?)
    };
    // the parts of an interrupted run count only for the same input, by content
    let mut resume = resume.clone();
    let input_hash = format!("{:016x}", data::file_xxh3(reader.path())?);
    resume
        .settings
        .insert("input_xxh3".into(), input_hash.into());
    let meta = EmbeddingsMeta::of(enc, model, &text_cols)?;
    // a whole run reads to the end (no counting pass); a shard needs the count for its range
    let (total, range) = match shard {
        Some(s) => {
            let total = match reader.total_rows {
                Some(n) if input.is_dir() => n as usize,
                _ => data::count_rows(input)?,
            };
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
    let mut parts = Parts::open(&dest, "encode", &resume, &range)?;
    let done = parts.done(&range);
    if done > 0 {
        progress.suspend(|| {
            crate::runtime::notes::note(&format!(
                "resuming: {done} rows were encoded by an interrupted run ({})",
                parts::folder(&dest).display()
            ))
        });
        progress.set_position(done as u64);
    }
    let mut written = done;
    let item = Arc::new(Field::new("item", DataType::Float32, false));
    for batch in data::blocks(reader, parts.resumed_at()..range.end, BLOCK) {
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
            let e = enc.encode_prompted(&texts, prompt, batch_size, &ProgressBar::hidden())?;
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
        let schema = Schema::new(fields).with_metadata(meta.to_schema_metadata());
        let rb = RecordBatch::try_new(Arc::new(schema), arrays).map_err(|e| Error::file(out, e))?;
        parts.write(&rb, batch.num_rows())?;
        progress.inc(batch.num_rows() as u64);
        written += batch.num_rows();
    }
    let wrote = parts.finish(&dest)?;
    if let Some(s) = shard {
        s.finish("encode", &dest, total, range.clone(), wrote)?;
    }
    Ok((written, dest))
}
