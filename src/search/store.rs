//! Stored embeddings, as `encode` writes them, used as an input: one Parquet file, or a folder
//! holding the shard files of one sharded `encode` (read in shard order, no `merge` needed).
//! Each file's schema carries how its vectors were made (model fingerprint, pooling,
//! normalisation, max length, compute type); a store made otherwise than the model at hand is
//! refused, naming the difference, because its vectors would silently mean something else.
use crate::data::{self, Batch};
use crate::error::{Error, Result};
use crate::model::{Embeddings, SentenceEncoder};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// The schema metadata key under which a file records its `EmbeddingsMeta` (JSON).
pub const META_KEY: &str = "condenser.embeddings";

/// How a file's vectors were made.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmbeddingsMeta {
    /// xxh3 of the model folder's config, weights and tokenizer (shard::model_fingerprint).
    pub model_fingerprint: String,
    /// The pooling modes, sentence-transformers' names (`["mean"]`).
    #[serde(deserialize_with = "pooling_modes")]
    pub pooling: Vec<String>,
    pub normalize: bool,
    pub max_seq_length: usize,
    pub dtype: String,
    pub dim: usize,
    /// The text columns embedded (one: column `embedding`).
    pub columns: Vec<String>,
}

impl EmbeddingsMeta {
    /// What `enc` (loaded from folder `model`) writes for `columns`.
    pub fn of(enc: &SentenceEncoder, model: &Path, columns: &[String]) -> Result<EmbeddingsMeta> {
        Ok(EmbeddingsMeta {
            model_fingerprint: crate::shard::model_fingerprint(model)?,
            pooling: enc
                .pooling
                .mode_names()
                .into_iter()
                .map(String::from)
                .collect(),
            normalize: enc.normalize,
            max_seq_length: enc.max_seq_length,
            dtype: format!("{:?}", enc.bert.dtype()).to_lowercase(),
            dim: enc.dim(),
            columns: columns.to_vec(),
        })
    }

    pub fn to_schema_metadata(&self) -> HashMap<String, String> {
        let json = serde_json::to_string(self).expect("serializes");
        HashMap::from([(META_KEY.to_string(), json)])
    }

    /// Err naming every setting in which `self` (the store's, from `file`) differs from `want`
    /// (the model's); the column list is not compared (the caller picks the column).
    pub fn check(&self, want: &EmbeddingsMeta, file: &Path) -> Result<()> {
        let mut diff = Vec::new();
        let mut cmp = |name: &str, got: String, w: String| {
            if got != w {
                diff.push(format!("{name} {got} (the model: {w})"));
            }
        };
        cmp(
            "model fingerprint",
            self.model_fingerprint.clone(),
            want.model_fingerprint.clone(),
        );
        cmp(
            "pooling",
            self.pooling.join(" + "),
            want.pooling.join(" + "),
        );
        cmp(
            "normalize",
            self.normalize.to_string(),
            want.normalize.to_string(),
        );
        cmp(
            "max_seq_length",
            self.max_seq_length.to_string(),
            want.max_seq_length.to_string(),
        );
        cmp("dtype", self.dtype.clone(), want.dtype.clone());
        cmp("dim", self.dim.to_string(), want.dim.to_string());
        if diff.is_empty() {
            return Ok(());
        }
        Err(Error::file(
            file,
            format!(
                "these embeddings were made otherwise than with this model: {}; re-run `condenser encode` with it",
                diff.join(", ")
            ),
        ))
    }

    /// The metadata a Parquet file's schema records (None: not written by `encode`).
    pub fn read(file: &Path) -> Result<Option<EmbeddingsMeta>> {
        data::schema_metadata(file)?
            .get(META_KEY)
            .map(|j| {
                serde_json::from_str(j)
                    .map_err(|e| Error::file(file, format!("unreadable {META_KEY}: {e}")))
            })
            .transpose()
    }
}

/// The pooling as a list of mode names; a store written before it was JSON holds Rust's debug
/// form of the Pooling struct (`Pooling { cls: false, max: false, mean: true, .. }`), read here
/// into the same list so its vectors stay usable.
fn pooling_modes<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either {
        Modes(Vec<String>),
        Legacy(String),
    }
    Ok(match Either::deserialize(d)? {
        Either::Modes(m) => m,
        Either::Legacy(s) => ["cls", "max", "mean", "mean_sqrt_len"]
            .into_iter()
            .filter(|m| s.contains(&format!(" {m}: true")))
            .map(String::from)
            .collect(),
    })
}

/// A store's files and what made them.
#[derive(Clone, Debug)]
pub struct StoredEmbeddings {
    pub files: Vec<PathBuf>,
    pub meta: EmbeddingsMeta,
    /// The vector column (`embedding`).
    pub column: String,
}

impl StoredEmbeddings {
    /// Open the store at `path` (a file, or a folder of one sharded run's files) for `want`.
    pub fn open(path: &Path, want: &EmbeddingsMeta) -> Result<StoredEmbeddings> {
        let files = store_files(path)?;
        let mut meta: Option<EmbeddingsMeta> = None;
        for f in &files {
            let m = EmbeddingsMeta::read(f)?.ok_or_else(|| {
                Error::file(
                    f,
                    format!("no {META_KEY} in its schema: not written by `condenser encode` (or by an older version); re-run encode"),
                )
            })?;
            m.check(want, f)?;
            if m.columns.len() != 1 {
                return Err(Error::file(
                    f,
                    format!(
                        "holds embeddings of {} columns ({}): encode the one text column to search",
                        m.columns.len(),
                        m.columns.join(", ")
                    ),
                ));
            }
            meta.get_or_insert(m);
        }
        Ok(StoredEmbeddings {
            files,
            meta: meta.expect("store_files returns at least one file"),
            column: "embedding".into(),
        })
    }

    /// Open the store at `path` for `enc`, loaded from folder `model`.
    pub fn for_model(path: &Path, enc: &SentenceEncoder, model: &Path) -> Result<StoredEmbeddings> {
        StoredEmbeddings::open(path, &EmbeddingsMeta::of(enc, model, &[])?)
    }

    /// Open the store at `path` whatever made it (its files must agree with each other): for
    /// searching it with vectors checked against it.
    pub fn open_as_made(path: &Path) -> Result<StoredEmbeddings> {
        let files = store_files(path)?;
        let first = EmbeddingsMeta::read(&files[0])?.ok_or_else(|| {
            Error::file(
                &files[0],
                format!("no {META_KEY} in its schema: not written by `condenser encode`"),
            )
        })?;
        StoredEmbeddings::open(path, &first)
    }

    /// The text column the vectors were made from.
    pub fn text_column(&self) -> &str {
        &self.meta.columns[0]
    }

    /// Call `f(first_row, batch, vectors)` for each record batch in order (rows counted across
    /// files); memory is one batch.
    pub fn for_each(
        &self,
        with_text: bool,
        mut f: impl FnMut(usize, &Batch, Vec<f32>) -> Result<()>,
    ) -> Result<()> {
        let mut at = 0;
        let text = self.text_column().to_string();
        let cols: Vec<&str> = match with_text {
            true => vec![text.as_str(), self.column.as_str()],
            false => vec![self.column.as_str()],
        };
        for file in &self.files {
            for b in data::open(file, &cols)? {
                let b = b?;
                let v = b.flat_vectors(&self.column, self.meta.dim)?;
                f(at, &b, v)?;
                at += b.num_rows();
            }
        }
        Ok(())
    }

    /// Rows in the store (from the files' metadata).
    pub fn rows(&self) -> Result<usize> {
        self.files.iter().map(|f| data::count_rows(f)).sum()
    }

    /// The stored vector of each of `texts` (matched by the embedded text), in their order; a
    /// text the store lacks is an error: mining or evaluating against a partial store would
    /// silently drop documents.
    pub fn lookup(&self, texts: &[&str]) -> Result<Embeddings> {
        Ok(self.lookup_rows(texts)?.0)
    }

    /// As `lookup`, with the texts each store row holds (by index into `texts`; equal texts
    /// share a row, and a row no text asked for holds none): how an index's rows map back.
    pub fn lookup_rows(&self, texts: &[&str]) -> Result<(Embeddings, Vec<Vec<u32>>)> {
        // a text may stand for several documents (equal texts under different ids)
        let mut at: HashMap<&str, Vec<u32>> = HashMap::with_capacity(texts.len());
        for (i, t) in texts.iter().enumerate() {
            at.entry(*t).or_default().push(i as u32);
        }
        let dim = self.meta.dim;
        let mut data = vec![0f32; texts.len() * dim];
        let mut found = vec![false; texts.len()];
        let mut of_row = Vec::new();
        self.for_each(true, |_, b, v| {
            for (r, t) in b.texts(self.text_column())?.into_iter().enumerate() {
                let docs = at.get(t).cloned().unwrap_or_default();
                for &i in &docs {
                    let i = i as usize;
                    data[i * dim..(i + 1) * dim].copy_from_slice(&v[r * dim..(r + 1) * dim]);
                    found[i] = true;
                }
                of_row.push(docs);
            }
            Ok(())
        })?;
        if let Some(i) = found.iter().position(|f| !f) {
            let missing = found.iter().filter(|f| !**f).count();
            let t: String = texts[i].chars().take(60).collect();
            return Err(Error::file(
                &self.files[0],
                format!(
                    "{missing} of {} corpus texts have no stored embedding (column {}), e.g. \"{t}\": encode this corpus",
                    texts.len(),
                    self.text_column()
                ),
            ));
        }
        Ok((Embeddings { dim, data }, of_row))
    }

    /// Each of the store's files by content (an index records its store so).
    pub fn fingerprints(&self) -> Result<Vec<StoreFile>> {
        self.files.iter().map(|f| StoreFile::of(f)).collect()
    }
}

/// The files of the store at `path`: the file itself, or a folder's shards of one sharded
/// `encode` (all present, same settings, in shard order: shard::shards_of's checks).
fn store_files(path: &Path) -> Result<Vec<PathBuf>> {
    if path.is_file() {
        return Ok(vec![path.to_path_buf()]);
    }
    if !path.is_dir() {
        return Err(Error::file(path, "no such file or folder of embeddings"));
    }
    let mut stems: Vec<String> = Vec::new();
    for e in std::fs::read_dir(path).map_err(|e| Error::file(path, e))? {
        let name = e.map_err(|e| Error::file(path, e))?.file_name();
        let name = name.to_string_lossy();
        if let Some((stem, _)) = name.split_once(".shard-") {
            if name.ends_with(".json") && !stems.iter().any(|s| s == stem) {
                stems.push(stem.to_string());
            }
        }
    }
    match stems.as_slice() {
        [stem] => {
            let files = crate::shard::shard_data(&path.join(format!("{stem}.parquet")))?;
            match files.is_empty() {
                true => Err(Error::file(path, "every shard is empty")),
                false => Ok(files),
            }
        }
        [] => Err(Error::file(
            path,
            "no shard manifests (NAME.shard-NNNNN-of-NNNNN.json) in this folder: give an embeddings file or the folder of a sharded encode",
        )),
        many => Err(Error::file(
            path,
            format!(
                "holds the shards of several runs ({}): give one file or a folder with one run",
                many.join(", ")
            ),
        )),
    }
}

/// One store file by content, as an index and a shard manifest record it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreFile {
    pub name: String,
    pub bytes: u64,
    /// xxh3 of the file's last MiB (the Parquet footer: schema, row groups, statistics).
    pub tail_xxh3: String,
}

impl StoreFile {
    pub fn of(path: &Path) -> Result<StoreFile> {
        let mut f = std::fs::File::open(path).map_err(|e| Error::file(path, e))?;
        let bytes = f.metadata().map_err(|e| Error::file(path, e))?.len();
        let tail = bytes.min(1 << 20);
        let mut buf = vec![0u8; tail as usize];
        f.seek(SeekFrom::Start(bytes - tail))
            .and_then(|_| f.read_exact(&mut buf))
            .map_err(|e| Error::file(path, e))?;
        Ok(StoreFile {
            name: path
                .file_name()
                .map(|n| n.to_string_lossy().to_string())
                .unwrap_or_default(),
            bytes,
            tail_xxh3: format!("{:016x}", xxhash_rust::xxh3::xxh3_64(&buf)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::EmbeddingsMeta;

    #[test]
    fn pooling_is_json_and_the_earlier_debug_form_still_reads() {
        let now = r#"{"model_fingerprint":"x","pooling":["mean"],"normalize":true,"max_seq_length":256,"dtype":"f32","dim":384,"columns":["text"]}"#;
        let before = now.replace(
            r#"["mean"]"#,
            r#""Pooling { cls: false, max: false, mean: true, mean_sqrt_len: false }""#,
        );
        let a: EmbeddingsMeta = serde_json::from_str(now).unwrap();
        let b: EmbeddingsMeta = serde_json::from_str(&before).unwrap();
        assert_eq!(a.pooling, ["mean"]);
        assert_eq!(a, b);
        let cls = before.replace("cls: false", "cls: true");
        let c: EmbeddingsMeta = serde_json::from_str(&cls).unwrap();
        assert_eq!(c.pooling, ["cls", "mean"]);
        assert!(serde_json::to_string(&a)
            .unwrap()
            .contains(r#""pooling":["mean"]"#));
    }
}
