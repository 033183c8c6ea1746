//! A folder of corpus vectors kept between evaluations (`--vector-cache`, issue 82): a recipe
//! scores the stock model, and each label-free model, on the same corpus in several steps (every
//! dev fold, all train queries, then test); each computed the same document vectors again, 10 of
//! the retrieval recipe's 35 corpus encodings. A file here is named by the xxh3 of everything the
//! vectors depend on, so a file is only ever read where the encoding would have written exactly
//! it: the model folder's fingerprint (config, weights, tokenizer), its pooling, normalisation,
//! max length, compute type and document prompt, the device, the batch size (batches set the
//! padding, which moves the last bits), the texts in order, the threads, every `CONDENSER_*`
//! setting (as crate::settings parsed them), the CPU kernels and matmul library, and this build of condenser (its version and
//! executable). Anything else changed makes another name, never a stale read.
use crate::data::write_with;
use crate::error::{Error, Result};
use crate::model::{Embeddings, SentenceEncoder};
use crate::search::EmbeddingsMeta;
use indicatif::ProgressBar;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use xxhash_rust::xxh3::Xxh3;

const MAGIC: &[u8; 8] = b"CNDVEC01";

/// The cache folder (created on first write).
#[derive(Clone, Debug)]
pub struct VectorCache {
    pub dir: PathBuf,
}

impl VectorCache {
    pub fn new(dir: &Path) -> VectorCache {
        VectorCache {
            dir: dir.to_path_buf(),
        }
    }

    /// The document vectors of `texts` by `enc` (loaded from `folder`), as
    /// `enc.encode_document(texts, batch, progress)` gives them: read from the cache where this
    /// exact encoding was stored, else computed and stored.
    pub fn document_vectors(
        &self,
        enc: &SentenceEncoder,
        folder: &Path,
        texts: &[&str],
        batch: usize,
        progress: &ProgressBar,
    ) -> Result<Embeddings> {
        let file = self
            .dir
            .join(format!("{}.vectors", key(enc, folder, texts, batch)?));
        if file.is_file() {
            return read(&file, texts.len(), enc.dim());
        }
        progress.set_length(texts.len() as u64);
        let e = enc.encode_document(texts, batch, progress)?;
        std::fs::create_dir_all(&self.dir).map_err(|err| Error::file(&self.dir, err))?;
        write_with(&file, |f| {
            f.write_all(MAGIC)?;
            f.write_all(&(e.len() as u64).to_le_bytes())?;
            f.write_all(&(e.dim as u64).to_le_bytes())?;
            let bytes: Vec<u8> = e.data.iter().flat_map(|v| v.to_le_bytes()).collect();
            f.write_all(&bytes)?;
            f.write_all(&xxhash_rust::xxh3::xxh3_64(&bytes).to_le_bytes())
        })?;
        Ok(e)
    }
}

/// The file name of one encoding: everything its vectors depend on (the module's comment).
fn key(enc: &SentenceEncoder, folder: &Path, texts: &[&str], batch: usize) -> Result<String> {
    let mut h = Xxh3::new();
    let mut field = |name: &str, value: &[u8]| {
        h.update(name.as_bytes());
        h.update(&(value.len() as u64).to_le_bytes());
        h.update(value);
    };
    let meta = EmbeddingsMeta::of(enc, folder, &["text".to_string()])?;
    field(
        "meta",
        serde_json::to_string(&meta).expect("serializes").as_bytes(),
    );
    let prompt = enc.prompts.document();
    field("prompt", format!("{prompt:?}").as_bytes());
    field("device", format!("{:?}", enc.device.location()).as_bytes());
    field("batch", &(batch as u64).to_le_bytes());
    field(
        "threads",
        &(rayon::current_num_threads() as u64).to_le_bytes(),
    );
    field("build", build().as_bytes());
    field(
        "settings",
        format!("{:?}", crate::settings::get()).as_bytes(),
    );
    field("texts", &(texts.len() as u64).to_le_bytes());
    for t in texts {
        field("t", t.as_bytes());
    }
    Ok(format!("{:016x}", h.digest()))
}

/// This build and the CPU code it runs: the version, the executable's bytes, the kernels and the
/// matmul library (hashed once a process).
fn build() -> &'static str {
    static BUILD: OnceLock<String> = OnceLock::new();
    BUILD.get_or_init(|| {
        // the code's own file (from Python, the extension, not the interpreter)
        let exe = crate::runtime::code_file()
            .and_then(|p| std::fs::read(p).ok())
            .map(|b| format!("{:016x}", xxhash_rust::xxh3::xxh3_64(&b)))
            .unwrap_or_default();
        format!(
            "{} {exe} {} {} {}",
            env!("CARGO_PKG_VERSION"),
            crate::model::kernels::isa::describe(),
            crate::model::kernels::blas::describe(),
            crate::model::kernels::f32_gemm::describe(),
        )
    })
}

/// A cached file's vectors: `rows` x `dim` as written, its checksum intact, else an error naming
/// the file (a damaged file is never read as vectors).
fn read(file: &Path, rows: usize, dim: usize) -> Result<Embeddings> {
    let bytes = std::fs::read(file).map_err(|e| Error::file(file, e))?;
    let bad = |why: String| {
        Error::file(
            file,
            format!("cached vectors unreadable ({why}): delete this file and evaluate again"),
        )
    };
    let body = rows * dim * 4;
    if bytes.len() != 8 + 16 + body + 8 || &bytes[..8] != MAGIC {
        return Err(bad(format!(
            "{} bytes, {rows} x {dim} vectors need {}",
            bytes.len(),
            8 + 16 + body + 8
        )));
    }
    let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    if (word(8), word(16)) != (rows as u64, dim as u64) {
        return Err(bad(format!(
            "holds {} x {} vectors, the corpus {rows} x {dim}",
            word(8),
            word(16)
        )));
    }
    let data_bytes = &bytes[24..24 + body];
    if xxhash_rust::xxh3::xxh3_64(data_bytes) != word(24 + body) {
        return Err(bad("checksum differs".into()));
    }
    let data = data_bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
        .collect();
    Ok(Embeddings { dim, data })
}
