use crate::error::{Context, Error, Result};
use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use std::fs::File;
use std::path::{Path, PathBuf};

/// A Parquet (zstd) file written under a temporary name beside its destination and renamed into
/// place by `finish`: a crash or error never leaves a half-written file where the output belongs,
/// and never destroys the previous output.
pub struct ParquetSink {
    dest: PathBuf,
    tmp: tempfile::NamedTempFile,
    writer: ArrowWriter<File>,
}

impl ParquetSink {
    pub fn create(dest: &Path, schema: SchemaRef) -> Result<ParquetSink> {
        let tmp = temp_beside(dest)?;
        let props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::default()))
            .build();
        let writer =
            ArrowWriter::try_new(tmp.reopen().in_file(dest)?, schema, Some(props)).in_file(dest)?;
        Ok(ParquetSink {
            dest: dest.to_path_buf(),
            tmp,
            writer,
        })
    }

    pub fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        self.writer.write(batch).in_file(&self.dest)
    }

    pub fn finish(self) -> Result<()> {
        let ParquetSink { dest, tmp, writer } = self;
        writer.close().in_file(&dest)?;
        put_in_place(tmp, &dest)
    }
}

/// Write whole batches to `dest` atomically.
pub fn write_parquet<'a>(
    dest: &Path,
    schema: SchemaRef,
    batches: impl IntoIterator<Item = &'a RecordBatch>,
) -> Result<()> {
    let mut sink = ParquetSink::create(dest, schema)?;
    for b in batches {
        sink.write(b)?;
    }
    sink.finish()
}

/// Write `bytes` to `dest` via a temporary file in the same folder and a rename.
pub fn write_atomic(dest: &Path, bytes: &[u8]) -> Result<()> {
    write_with(dest, |f| std::io::Write::write_all(f, bytes))
}

/// Write `dest` by `fill` (streaming into the file) via a temporary file in the same folder and
/// a rename: a failed or killed write leaves no partial file where the output belongs.
pub fn write_with(dest: &Path, fill: impl FnOnce(&mut File) -> std::io::Result<()>) -> Result<()> {
    let mut tmp = temp_beside(dest)?;
    fill(tmp.as_file_mut()).in_file(dest)?;
    put_in_place(tmp, dest)
}

/// Write `dest` by `fill`, which writes the file at the path it is given (a library that opens
/// its own file: safetensors' streaming writer), via a temporary file in the same folder and a
/// rename, as `write_with`.
pub fn write_with_path(dest: &Path, fill: impl FnOnce(&Path) -> Result<()>) -> Result<()> {
    let tmp = temp_beside(dest)?;
    fill(tmp.path())?;
    // `tmp`'s handle is the inode `fill` wrote (it truncates the file in place, not replaces it)
    put_in_place(tmp, dest)
}

/// A written temporary file (`temp_beside`) synced to disk and renamed to `dest`: the one way
/// every writer here puts its output in place.
fn put_in_place(tmp: tempfile::NamedTempFile, dest: &Path) -> Result<()> {
    tmp.as_file().sync_all().in_file(dest)?;
    tmp.persist(dest).map_err(|e| Error::file(dest, e.error))?;
    Ok(())
}

/// A temporary file in `dest`'s folder (so the final rename stays on one file system), created
/// with the usual 0644 mode rather than tempfile's private 0600.
fn temp_beside(dest: &Path) -> Result<tempfile::NamedTempFile> {
    let dir = match dest.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir).in_file(dir)?;
    let mut b = tempfile::Builder::new();
    b.prefix(".condenser-").suffix(".tmp");
    #[cfg(unix)]
    b.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o644));
    b.tempfile_in(dir).in_file(dest)
}

/// Stream every batch of `reader` through `f` into `dest` (Parquet, zstd, atomic), the schema
/// taken from the first output batch. Returns the rows written.
pub fn stream_to_parquet(
    reader: super::BatchReader,
    dest: &Path,
    progress: &indicatif::ProgressBar,
    mut f: impl FnMut(&super::Batch) -> Result<RecordBatch>,
) -> Result<usize> {
    let mut sink: Option<ParquetSink> = None;
    let mut rows = 0;
    for batch in reader {
        let rb = f(&batch?)?;
        if sink.is_none() {
            sink = Some(ParquetSink::create(dest, rb.schema())?);
        }
        sink.as_mut().unwrap().write(&rb)?;
        rows += rb.num_rows();
        progress.inc(rb.num_rows() as u64);
    }
    // an empty input is an error from the reader, so a sink exists here
    sink.expect("a non-empty input").finish()?;
    Ok(rows)
}
