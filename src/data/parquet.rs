use super::source::{missing_column, Inner, BATCH_ROWS};
use crate::error::{Context, Error, Result};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ProjectionMask;
use std::fs::File;
use std::path::Path;

fn builder(path: &Path) -> Result<ParquetRecordBatchReaderBuilder<File>> {
    let file = File::open(path).in_file(path)?;
    ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| {
        Error::file(
            path,
            format!("not a readable Parquet file (corrupt or truncated?): {e}"),
        )
    })
}

pub fn column_names(path: &Path) -> Result<Vec<String>> {
    Ok(builder(path)?
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect())
}

/// The key-value metadata of a Parquet file's Arrow schema (what made its data, for `encode`'s
/// vectors).
pub fn schema_metadata(path: &Path) -> Result<arrow_schema::Metadata> {
    Ok(builder(path)?.schema().metadata().clone())
}

pub fn read(path: &Path, columns: &[&str]) -> Result<(Inner, Option<u64>)> {
    let b = builder(path)?;
    let schema = b.schema().clone();
    let have: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
    let mut roots = Vec::with_capacity(columns.len());
    for c in columns {
        roots.push(
            schema
                .index_of(c)
                .map_err(|_| missing_column(path, c, &have))?,
        );
    }
    let total = b.metadata().file_metadata().num_rows().max(0) as u64;
    let mask = ProjectionMask::roots(b.parquet_schema(), roots.iter().copied());
    let reader = b
        .with_projection(mask)
        .with_batch_size(BATCH_ROWS)
        .build()
        .in_file(path)?;
    // the projection keeps file order; callers index columns by name, so order does not matter
    let path = path.to_path_buf();
    let cols = columns.join(", ");
    let iter = reader.map(move |r| {
        r.map_err(|e| {
            Error::file(
                &path,
                format!("reading columns [{cols}] failed (corrupt data or non-UTF-8 text?): {e}"),
            )
        })
    });
    Ok((Box::new(iter), Some(total)))
}
