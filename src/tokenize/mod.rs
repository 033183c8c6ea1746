//! The model's tokenizer (tokenizers crate), loaded from a model folder or a tokenizer.json, with
//! padding and truncation turned off (all-MiniLM's tokenizer.json bakes in padding to 128), plus an
//! exact fast path for plain-BERT WordPiece on ASCII text (see `wordpiece`).
mod wordpiece;

use crate::error::{Context, Error, Result};
use std::path::{Path, PathBuf};
use tokenizers::models::wordpiece::WordPiece;
use tokenizers::normalizers::BertNormalizer;
use tokenizers::pre_tokenizers::bert::BertPreTokenizer;
use tokenizers::processors::bert::BertProcessing;
pub use wordpiece::FastWordPiece;

#[derive(Clone)]
pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
    fast: Option<FastWordPiece>,
    source: PathBuf,
}

impl Tokenizer {
    /// `path`: a model folder (tokenizer.json, else vocab.txt), a tokenizer.json, or a vocab.txt.
    pub fn load(path: &Path) -> Result<Tokenizer> {
        let file = if path.is_dir() {
            let json = path.join("tokenizer.json");
            if json.is_file() {
                json
            } else {
                path.join("vocab.txt")
            }
        } else {
            path.to_path_buf()
        };
        if !file.is_file() {
            let what = if path.is_dir() {
                "no tokenizer.json or vocab.txt in this folder"
            } else {
                "no such file"
            };
            return Err(Error::file(if path.is_dir() { path } else { &file }, what));
        }
        let mut inner = if file.extension().is_some_and(|e| e == "txt") {
            from_vocab(&file)?
        } else {
            tokenizers::Tokenizer::from_file(&file)
                .map_err(|e| Error::file(&file, format!("not a valid tokenizer.json: {e}")))?
        };
        inner.with_padding(None);
        inner
            .with_truncation(None)
            .map_err(|e| Error::file(&file, e))?;
        let fast = FastWordPiece::new(&inner);
        Ok(Tokenizer {
            inner,
            fast,
            source: file,
        })
    }

    pub fn source(&self) -> &Path {
        &self.source
    }

    pub fn inner(&self) -> &tokenizers::Tokenizer {
        &self.inner
    }

    /// Whether the exact ASCII fast path is available for this tokenizer's pipeline.
    pub fn has_fast_path(&self) -> bool {
        self.fast.is_some()
    }

    /// Token ids of `text` without special tokens, appended to `out`.
    pub fn ids_into(&self, text: &str, out: &mut Vec<u32>) -> Result<()> {
        if let Some(f) = &self.fast {
            if f.encode(text, out) {
                return Ok(());
            }
        }
        self.slow_ids_into(text, out)
    }

    /// The tokenizers crate's own answer, bypassing the fast path (tests compare the two).
    pub fn slow_ids_into(&self, text: &str, out: &mut Vec<u32>) -> Result<()> {
        let enc = self.inner.encode(text, false).doing("tokenizing")?;
        out.extend_from_slice(enc.get_ids());
        Ok(())
    }

    pub fn ids(&self, text: &str) -> Result<Vec<u32>> {
        let mut v = Vec::new();
        self.ids_into(text, &mut v)?;
        Ok(v)
    }

    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    pub fn token(&self, id: u32) -> Option<String> {
        self.inner.id_to_token(id)
    }

    pub fn token_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }
}

/// A BERT tokenizer from a bare vocab.txt (older model folders ship no tokenizer.json).
fn from_vocab(file: &Path) -> Result<tokenizers::Tokenizer> {
    let bad = |e: tokenizers::Error| Error::file(file, format!("not a valid WordPiece vocab: {e}"));
    let wp = WordPiece::from_file(&file.to_string_lossy())
        .unk_token("[UNK]".into())
        .build()
        .map_err(bad)?;
    let mut t = tokenizers::Tokenizer::new(wp);
    let lowercase = lowercase_from_config(file);
    t.with_normalizer(Some(BertNormalizer::new(true, true, None, lowercase)))
        .map_err(bad)?;
    t.with_pre_tokenizer(Some(BertPreTokenizer));
    let id = |s: &str| {
        t.token_to_id(s)
            .ok_or_else(|| Error::file(file, format!("vocab lacks {s}")))
    };
    let (sep, cls) = (id("[SEP]")?, id("[CLS]")?);
    t.with_post_processor(Some(BertProcessing::new(
        ("[SEP]".into(), sep),
        ("[CLS]".into(), cls),
    )));
    let specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        .map(|s| tokenizers::AddedToken::from(s, true));
    t.add_special_tokens(specials).map_err(bad)?;
    Ok(t)
}

/// tokenizer_config.json's do_lower_case beside the vocab; uncased (true) when absent, as BERT's default.
fn lowercase_from_config(vocab: &Path) -> bool {
    let cfg = vocab.with_file_name("tokenizer_config.json");
    std::fs::read_to_string(cfg)
        .ok()
        .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok())
        .and_then(|v| v.get("do_lower_case").and_then(|b| b.as_bool()))
        .unwrap_or(true)
}
