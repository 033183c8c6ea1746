use super::source::{missing_column, Inner};
use crate::error::{Context, Error, Result};
use arrow_array::RecordBatch;
use arrow_ipc::reader::{FileReader, StreamReader};
use arrow_schema::SchemaRef;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

enum Reader {
    File(FileReader<BufReader<File>>),
    Stream(StreamReader<BufReader<File>>),
}

/// Arrow IPC comes as a file (magic "ARROW1", random access) or a stream; accept both.
fn open(path: &Path, projection: Option<Vec<usize>>) -> Result<Reader> {
    let mut magic = [0u8; 6];
    let is_file = File::open(path)
        .in_file(path)?
        .read_exact(&mut magic)
        .is_ok()
        && &magic == b"ARROW1";
    let f = BufReader::new(File::open(path).in_file(path)?);
    let bad = |e| {
        Error::file(
            path,
            format!("not a readable Arrow IPC file (corrupt or truncated?): {e}"),
        )
    };
    Ok(if is_file {
        Reader::File(FileReader::try_new(f, projection).map_err(bad)?)
    } else {
        Reader::Stream(StreamReader::try_new(f, projection).map_err(bad)?)
    })
}

fn schema(r: &Reader) -> SchemaRef {
    match r {
        Reader::File(f) => f.schema(),
        Reader::Stream(s) => s.schema(),
    }
}

pub fn column_names(path: &Path) -> Result<Vec<String>> {
    Ok(schema(&open(path, None)?)
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect())
}

pub fn read(path: &Path, columns: &[&str]) -> Result<(Inner, Option<u64>)> {
    let s = schema(&open(path, None)?);
    let have: Vec<String> = s.fields().iter().map(|f| f.name().clone()).collect();
    let mut proj = Vec::with_capacity(columns.len());
    for c in columns {
        proj.push(s.index_of(c).map_err(|_| missing_column(path, c, &have))?);
    }
    let reader = open(path, Some(proj))?;
    let p = path.to_path_buf();
    let wrap = move |r: std::result::Result<RecordBatch, arrow_schema::ArrowError>| {
        r.map_err(|e| {
            Error::file(
                &p,
                format!("reading Arrow IPC data failed (corrupt or truncated?): {e}"),
            )
        })
    };
    Ok(match reader {
        Reader::File(f) => {
            // the footer has block sizes, not row counts: leave the total unknown
            (Box::new(f.map(wrap)) as Inner, None)
        }
        Reader::Stream(s) => (Box::new(s.map(wrap)) as Inner, None),
    })
}
