//! A pre-training corpus packed into fixed-size blocks "`[CLS]` tokens `[SEP]`" of at most
//! max_seq_length tokens. Texts are tokenized as they stream in (a dataset's text column, or a
//! plain text file, one text a line) and the blocks go to a file on disk that training reads
//! by index, so a corpus larger than memory works.
use crate::error::{Error, Result};
use crate::model::Specials;
use crate::tokenize::Tokenizer;
use indicatif::ProgressBar;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

pub struct Blocks {
    file: std::fs::File,
    pub path: PathBuf,
    pub len: usize,
    /// Tokens per record, `[CLS]` and `[SEP]` included.
    pub width: usize,
    /// What the blocks were made from (see `cache_key`); a resumed run must see the same.
    pub key: String,
}

/// The blocks of `inputs` in `dir`: read from the cache file when one was built from the same
/// corpus files (paths, sizes, modification times), column, tokenizer (its file's bytes) and
/// length, built (and any stale cache removed) otherwise. Returns the blocks and whether they were
/// built now.
pub fn prepare(
    dir: &Path,
    inputs: &[PathBuf],
    column: &str,
    tok: &Tokenizer,
    max_seq_length: usize,
    bar: &ProgressBar,
) -> Result<(Blocks, bool)> {
    let key = cache_key(inputs, column, tok, max_seq_length)?;
    let path = dir.join(format!("blocks-{max_seq_length}-{key}.u32"));
    if path.is_file() {
        return Ok((Blocks::open(&path, max_seq_length, &key)?, false));
    }
    std::fs::create_dir_all(dir).map_err(|e| Error::file(dir, e))?;
    for old in std::fs::read_dir(dir)
        .map_err(|e| Error::file(dir, e))?
        .flatten()
    {
        let name = old.file_name().to_string_lossy().into_owned();
        if name.starts_with("blocks-") && name.ends_with(".u32") {
            let _ = std::fs::remove_file(old.path());
        }
    }
    let b = Blocks::build(inputs, column, tok, max_seq_length, &path, &key, bar)?;
    Ok((b, true))
}

/// A hash of everything the blocks depend on, as 16 hex digits.
pub fn cache_key(
    inputs: &[PathBuf],
    column: &str,
    tok: &Tokenizer,
    max_seq_length: usize,
) -> Result<String> {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    for p in inputs {
        let m = std::fs::metadata(p).map_err(|e| Error::file(p, e))?;
        let mtime = m
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        let abs = std::fs::canonicalize(p).unwrap_or_else(|_| p.clone());
        h.update(abs.to_string_lossy().as_bytes());
        h.update(&m.len().to_le_bytes());
        h.update(&mtime.to_le_bytes());
    }
    h.update(column.as_bytes());
    let vocab = std::fs::read(tok.source()).map_err(|e| Error::file(tok.source(), e))?;
    h.update(&vocab);
    h.update(&(max_seq_length as u64).to_le_bytes());
    Ok(format!("{:016x}", h.digest()))
}

/// Record layout: u32 length, then `width` u32 token ids (little-endian, zero-padded).
impl Blocks {
    fn record_bytes(width: usize) -> usize {
        4 * (width + 1)
    }

    /// Pack `inputs` (text files; tabular ones: each of the comma-separated `column` names they
    /// have) into `dest`, atomically.
    pub fn build(
        inputs: &[PathBuf],
        column: &str,
        tok: &Tokenizer,
        max_seq_length: usize,
        dest: &Path,
        key: &str,
        bar: &ProgressBar,
    ) -> Result<Blocks> {
        let sp = Specials::of(tok)?;
        let body = max_seq_length.saturating_sub(2).max(1);
        let tmp = dest.with_extension("tmp");
        let f = std::fs::File::create(&tmp).map_err(|e| Error::file(&tmp, e))?;
        let mut w = BufWriter::new(f);
        let mut pending: Vec<u32> = Vec::with_capacity(body * 2);
        let mut n = 0usize;
        let mut ids = Vec::new();
        let mut emit = |chunk: &[u32], w: &mut BufWriter<std::fs::File>| -> std::io::Result<()> {
            let mut rec = Vec::with_capacity(body + 3);
            rec.push(chunk.len() as u32 + 2);
            rec.push(sp.cls);
            rec.extend_from_slice(chunk);
            rec.push(sp.sep);
            rec.resize(body + 3, 0);
            for v in rec {
                w.write_all(&v.to_le_bytes())?;
            }
            n += 1;
            Ok(())
        };
        let io = |e: std::io::Error| Error::file(&tmp, e);
        let mut add = |text: &str, w: &mut BufWriter<std::fs::File>| -> Result<()> {
            ids.clear();
            tok.ids_into(text, &mut ids)?;
            pending.extend_from_slice(&ids);
            while pending.len() >= body {
                emit(&pending[..body], w).map_err(io)?;
                pending.drain(..body);
            }
            Ok(())
        };
        // the listed columns some tabular file had: one that none had is a typo, never skipped
        let mut read: Option<Vec<&str>> = None;
        for input in inputs {
            let cols = crate::data::for_each_text_of(
                input,
                column,
                |t| add(t, &mut w).map(|_| true),
                |n| bar.inc(n),
            )?;
            if let Some(cols) = cols {
                read.get_or_insert_with(Vec::new).extend(cols);
            }
        }
        if let Some(read) = read {
            let unread: Vec<&str> = column
                .split(',')
                .map(str::trim)
                .filter(|c| !c.is_empty() && !read.contains(c))
                .collect();
            if !unread.is_empty() {
                let _ = std::fs::remove_file(&tmp);
                return Err(Error::msg(format!(
                    "--column {}: no corpus file has {} (a misspelt name would be skipped silently)",
                    column,
                    unread.join(", ")
                )));
            }
        }
        // the tail shorter than a block is kept when it has some substance
        if pending.len() >= body / 4 {
            emit(&pending, &mut w).map_err(io)?;
        }
        w.flush().map_err(io)?;
        drop(w);
        if n == 0 {
            let _ = std::fs::remove_file(&tmp);
            return Err(Error::msg(format!(
                "the corpus ({}) holds too little text for one block of {max_seq_length} tokens",
                inputs
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        std::fs::rename(&tmp, dest).map_err(|e| Error::file(dest, e))?;
        Blocks::open(dest, max_seq_length, key)
    }

    pub fn open(path: &Path, max_seq_length: usize, key: &str) -> Result<Blocks> {
        let width = max_seq_length.saturating_sub(2).max(1) + 2;
        let file = std::fs::File::open(path).map_err(|e| Error::file(path, e))?;
        let bytes = file.metadata().map_err(|e| Error::file(path, e))?.len() as usize;
        if !bytes.is_multiple_of(Self::record_bytes(width)) {
            return Err(Error::file(
                path,
                format!("not a block file of {max_seq_length}-token blocks"),
            ));
        }
        Ok(Blocks {
            file,
            path: path.to_path_buf(),
            len: bytes / Self::record_bytes(width),
            width,
            key: key.to_string(),
        })
    }

    pub fn get(&self, i: usize) -> Result<Vec<u32>> {
        let rb = Self::record_bytes(self.width);
        let mut buf = vec![0u8; rb];
        self.file
            .read_exact_at(&mut buf, (i * rb) as u64)
            .map_err(|e| Error::file(&self.path, format!("block {i}: {e}")))?;
        let v: Vec<u32> = buf
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        let len = (v[0] as usize).min(self.width);
        Ok(v[1..1 + len].to_vec())
    }
}
