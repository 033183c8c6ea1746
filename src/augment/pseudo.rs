//! Pseudo-queries from the corpus alone, for a retriever with no labels (`augment --corpus`): no
//! generator model exists in the registries, so pairs come from the documents' own structure.
//! - title-body: a document's title against its body (the text without a leading copy of the
//!   title), only where the document has a title;
//! - crop: two spans of the same document cropped independently (Contriever's "independent
//!   cropping": each span's length a uniform fraction of the document's words, its start uniform),
//!   one pair per document per `--crops`;
//! - crop-doc: one cropped span against its whole document (a pseudo-query and the corpus
//!   document it came from, for mining and a cross-encoder's margins as GPL trains).
//!
//! Documents are deduplicated by text first (a corpus with a document twice would make it its
//! own in-batch negative). Each document's draws come from a generator seeded by (seed, document
//! id), so a document's pairs do not depend on the corpus order and a seed always gives the same
//! file. No pair has equal sides, and no (anchor, positive) pair is written twice.
use super::query_pairs::QuerySpec;
use crate::data::retrieval::{corpus_file, read_documents, Document};
use crate::data::write_parquet;
use crate::error::{Error, Result};
use crate::flags;
use arrow_array::{ArrayRef, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use rand::{Rng, SeedableRng};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use xxhash_rust::xxh3::xxh3_64_with_seed;

/// Which pairs `augment --corpus` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PseudoPairs {
    /// (title, text) where the document has a title
    TitleBody,
    /// two independently cropped spans of one document
    Crop,
    /// both of the above
    Both,
    /// a cropped span against its whole document: a pseudo-query whose positive is a corpus
    /// document (GPL's shape: `mine --corpus` finds its negatives, a cross-encoder its margins)
    CropDoc,
}

/// `augment --corpus`'s flags.
#[derive(Clone, Debug, clap::Args, serde::Serialize)]
pub struct PseudoSpec {
    /// Pseudo-query pairs from this corpus alone (a corpus file with id, text and optionally title,
    /// or a retrieval folder holding one): no cross-encoder, no input pairs
    #[arg(long = flags::CORPUS, conflicts_with_all = ["cross_encoder", "input", "model", "sampling", "relabel_gold", "unlabeled", "columns", "top_k", "batch_size", "device"])]
    pub corpus: Option<PathBuf>,
    /// Which pseudo-query pairs to write
    #[arg(long, value_enum, default_value = "both", requires = "corpus")]
    pub pseudo: PseudoPairs,
    /// Cropped pairs per document (each two fresh spans)
    #[arg(long, default_value_t = 1, requires = "corpus",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub crops: usize,
    /// Shortest span, as a fraction of the document's words (Contriever: 0.1)
    #[arg(long, default_value_t = 0.1, requires = "corpus")]
    pub crop_min: f64,
    /// Longest span, as a fraction of the document's words (Contriever: 0.5)
    #[arg(long, default_value_t = 0.5, requires = "corpus")]
    pub crop_max: f64,
    /// Documents with fewer words give no cropped pair (two spans of a short text say little)
    #[arg(long, default_value_t = 8, requires = "corpus")]
    pub crop_min_words: usize,
}

/// What `pseudo_pairs` wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PseudoSummary {
    pub documents: usize,
    pub duplicates: usize,
    pub title_body: usize,
    pub crops: usize,
}

impl PseudoSpec {
    /// Refuse settings that cannot crop (checked before anything is read).
    pub fn check(&self) -> Result<()> {
        let ok = |v: f64| v > 0.0 && v <= 1.0;
        if !ok(self.crop_min) || !ok(self.crop_max) || self.crop_min > self.crop_max {
            return Err(Error::msg(format!(
                "--crop-min {} and --crop-max {}: fractions in (0, 1] with min <= max",
                self.crop_min, self.crop_max
            )));
        }
        Ok(())
    }

    /// The corpus file: the path itself, or a retrieval folder's `corpus.*`.
    fn corpus_file(&self) -> Result<PathBuf> {
        let c = self
            .corpus
            .as_ref()
            .ok_or_else(|| Error::msg("--corpus is needed for pseudo-query pairs"))?;
        corpus_file(c)
    }

    /// (anchor, positive, doc_id, kind) rows for the corpus, in corpus order.
    pub fn pairs(&self, seed: u64) -> Result<(Vec<[String; 4]>, PseudoSummary)> {
        self.check()?;
        let path = self.corpus_file()?;
        let docs = read_documents(&path)?;
        let total = docs.len();
        let mut seen_text = HashSet::new();
        let docs: Vec<Document> = docs
            .into_iter()
            .filter(|d| !d.text.is_empty() && seen_text.insert(d.text.clone()))
            .collect();
        let mut summary = PseudoSummary {
            documents: docs.len(),
            duplicates: total - docs.len(),
            ..Default::default()
        };
        let mut seen = HashSet::new();
        let mut rows = Vec::new();
        let mut push = |a: String, p: String, d: &Document, kind: &str| -> bool {
            if a == p || !seen.insert((a.clone(), p.clone())) {
                return false;
            }
            rows.push([a, p, d.id.clone(), kind.to_string()]);
            true
        };
        let (title, crop) = match self.pseudo {
            PseudoPairs::TitleBody => (true, false),
            PseudoPairs::Crop | PseudoPairs::CropDoc => (false, true),
            PseudoPairs::Both => (true, true),
        };
        for d in &docs {
            if title {
                if let Some(t) = &d.title {
                    summary.title_body +=
                        push(t.clone(), body(t, &d.text), d, "title-body") as usize;
                }
            }
            if crop {
                let words: Vec<&str> = d.text.split_whitespace().collect();
                if words.len() < self.crop_min_words.max(2) {
                    continue;
                }
                let mut rng =
                    rand::rngs::StdRng::seed_from_u64(xxh3_64_with_seed(d.id.as_bytes(), seed));
                for _ in 0..self.crops {
                    let a = self.span(&words, &mut rng);
                    let (b, kind) = if self.pseudo == PseudoPairs::CropDoc {
                        (d.full_text(), "crop-doc")
                    } else {
                        (self.span(&words, &mut rng), "crop")
                    };
                    summary.crops += push(a, b, d, kind) as usize;
                }
            }
        }
        Ok((rows, summary))
    }

    /// One span: a uniform fraction in [crop_min, crop_max] of the words (at least one), from a
    /// uniform start.
    fn span(&self, words: &[&str], rng: &mut impl Rng) -> String {
        let n = words.len();
        let frac = rng.random_range(self.crop_min..=self.crop_max);
        let len = ((frac * n as f64).round() as usize).clamp(1, n);
        let start = rng.random_range(0..=n - len);
        words[start..start + len].join(" ")
    }
}

/// The text without the leading copies of the title (Cranfield's texts all start with theirs, one
/// twice: the pair would be a string match), unless that leaves nothing.
fn body(title: &str, text: &str) -> String {
    let mut rest = text;
    while let Some(r) = rest.strip_prefix(title) {
        rest = r.trim_start();
    }
    if rest.is_empty() {
        text.to_string()
    } else {
        rest.to_string()
    }
}

/// Write the pairs to `out` (Parquet: anchor, positive, doc_id, kind), atomically.
pub fn write_pseudo_pairs(spec: &PseudoSpec, seed: u64, out: &Path) -> Result<PseudoSummary> {
    let (rows, summary) = spec.pairs(seed)?;
    if rows.is_empty() {
        return Err(Error::file(
            &spec.corpus_file()?,
            format!(
                "no pseudo-query pairs: no document has a title{} (--pseudo {:?})",
                if spec.pseudo == PseudoPairs::TitleBody {
                    String::new()
                } else {
                    format!(" or {} words", spec.crop_min_words)
                },
                spec.pseudo
            ),
        ));
    }
    write_pairs(&rows, out)?;
    Ok(summary)
}

/// Pairs of real queries with their top documents (`--queries`) to `out`, atomically; the rows.
pub fn write_query_pairs(spec: &PseudoSpec, q: &QuerySpec, out: &Path) -> Result<usize> {
    let rows = q.pairs(&spec.corpus_file()?)?;
    if rows.is_empty() {
        return Err(Error::msg("no query pairs: no query found a document"));
    }
    write_pairs(&rows, out)?;
    Ok(rows.len())
}

/// (anchor, positive, doc_id, kind) rows as Parquet.
fn write_pairs(rows: &[[String; 4]], out: &Path) -> Result<()> {
    let names = ["anchor", "positive", "doc_id", "kind"];
    let schema = Arc::new(Schema::new(
        names
            .iter()
            .map(|n| Field::new(*n, DataType::Utf8, false))
            .collect::<Vec<_>>(),
    ));
    let cols: Vec<ArrayRef> = (0..names.len())
        .map(|c| {
            Arc::new(StringArray::from_iter_values(
                rows.iter().map(|r| r[c].as_str()),
            )) as ArrayRef
        })
        .collect();
    let batch =
        RecordBatch::try_new(schema.clone(), cols).map_err(|e| Error::msg(e.to_string()))?;
    write_parquet(out, schema, [&batch])
}
