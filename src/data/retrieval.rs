//! A retrieval folder: queries, corpus and relevance judgements (qrels), in either layout:
//! - BEIR's, read unchanged: `corpus.jsonl` (`_id`, `title`, `text`), `queries.jsonl` (`_id`,
//!   `text`), `qrels/<split>.tsv` (header `query-id corpus-id score`);
//! - ours: `queries.*` (`id`, `text`), `corpus.*` (`id`, `title?`, `text`), `qrels.*` (`query_id`,
//!   `doc_id`, `score`), any dataset format; a `qrels/<split>.*` folder works here too.
use crate::data;
use crate::error::{Error, Result};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

/// The qrels split read when a folder has a `qrels/` directory and none is named (BEIR's default).
pub const DEFAULT_SPLIT: &str = "test";

/// A retrieval folder: queries, corpus and relevance judgements.
#[derive(Clone, Debug, Default)]
pub struct RetrievalSet {
    /// (id, text) of the queries that have at least one relevant document.
    pub queries: Vec<(String, String)>,
    /// (id, text) with text = "title text" where a title column exists (BEIR's join).
    pub corpus: Vec<(String, String)>,
    pub relevant: HashMap<String, HashSet<String>>,
    /// Queries dropped for having no relevant document.
    pub dropped_queries: usize,
}

/// `dir/stem.<ext>` for the first supported extension present.
pub fn find_file(dir: &Path, stem: &str) -> Result<PathBuf> {
    ["parquet", "arrow", "jsonl", "csv", "tsv"]
        .iter()
        .map(|e| dir.join(format!("{stem}.{e}")))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            Error::file(
                &dir.join(format!("{stem}.parquet")),
                "no such file (retrieval folders hold queries, corpus and qrels)",
            )
        })
}

/// A corpus given as a file, or as a retrieval folder holding one (`corpus.*`).
pub fn corpus_file(p: &Path) -> Result<PathBuf> {
    if p.is_dir() {
        find_file(p, "corpus")
    } else {
        Ok(p.to_path_buf())
    }
}

/// The first of `names` the file has: the same data under BEIR's and our column names.
fn pick<'a>(path: &Path, names: &[&'a str]) -> Result<&'a str> {
    find_column(path, names)?.ok_or_else(|| {
        let have = data::column_names(path).unwrap_or_default();
        Error::file(
            path,
            format!("no column {} (has {})", names.join(" or "), have.join(", ")),
        )
    })
}

/// The first of `names` the file has, if any.
pub fn find_column<'a>(path: &Path, names: &[&'a str]) -> Result<Option<&'a str>> {
    let have = data::column_names(path)?;
    Ok(names.iter().find(|n| have.iter().any(|h| h == *n)).copied())
}

/// One corpus row: id, the title where the file has a non-empty one, the text (both trimmed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Document {
    pub id: String,
    pub title: Option<String>,
    pub text: String,
}

impl Document {
    /// The text a retriever sees: `title text` where there is a title (as BEIR's evaluation and
    /// sentence-transformers' join them), else the text.
    pub fn full_text(&self) -> String {
        match &self.title {
            Some(title) => format!("{title} {}", self.text),
            None => self.text.clone(),
        }
    }
}

/// The corpus file's rows (`_id` or `id`, `text`, optional `title`).
pub fn read_documents(path: &Path) -> Result<Vec<Document>> {
    let id = pick(path, &["_id", "id"])?;
    let has_title = data::column_names(path)?.iter().any(|c| c == "title");
    let mut cols = vec![id, "text"];
    if has_title {
        cols.push("title");
    }
    let mut out = Vec::new();
    for b in data::open(path, &cols)? {
        let b = b?;
        let ids = b.ids(id)?;
        let texts = b.texts("text")?;
        let titles = if has_title {
            b.optional_texts("title")?
        } else {
            vec![None; ids.len()]
        };
        for ((id, t), title) in ids.into_iter().zip(texts).zip(titles) {
            out.push(Document {
                id,
                title: title
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                    .map(String::from),
                text: t.trim().to_string(),
            });
        }
    }
    if out.is_empty() {
        return Err(Error::file(path, "no rows"));
    }
    Ok(out)
}

/// (id, text) rows; `title text` where the file has a non-empty title (BEIR's join).
pub fn read_texts(path: &Path) -> Result<Vec<(String, String)>> {
    Ok(read_documents(path)?
        .into_iter()
        .map(|d| {
            let text = d.full_text();
            (d.id, text)
        })
        .collect())
}

fn check_unique(path: &Path, items: &[(String, String)]) -> Result<HashSet<String>> {
    let mut seen = HashSet::with_capacity(items.len());
    for (row, (id, _)) in items.iter().enumerate() {
        if !seen.insert(id.clone()) {
            return Err(Error::cell(
                path,
                row + 1,
                "id",
                format!("duplicate id '{id}'"),
            ));
        }
    }
    Ok(seen)
}

/// The qrels file: `qrels/<split>.*` where the folder has a qrels directory, else `qrels.*`.
fn qrels_path(dir: &Path, split: Option<&str>) -> Result<PathBuf> {
    let sub = dir.join("qrels");
    if sub.is_dir() {
        return find_file(&sub, split.unwrap_or(DEFAULT_SPLIT));
    }
    match split {
        Some(s) => Err(Error::file(
            &sub,
            format!("split '{s}' asked for, but the folder has no qrels/ directory (its qrels are one file)"),
        )),
        None => find_file(dir, "qrels"),
    }
}

impl RetrievalSet {
    /// The folder with the default split.
    pub fn load(dir: &Path) -> Result<RetrievalSet> {
        RetrievalSet::load_split(dir, None)
    }

    pub fn load_split(dir: &Path, split: Option<&str>) -> Result<RetrievalSet> {
        let (qp, cp, rp) = (
            find_file(dir, "queries")?,
            find_file(dir, "corpus")?,
            qrels_path(dir, split)?,
        );
        let queries = read_texts(&qp)?;
        let corpus = read_texts(&cp)?;
        let qids = check_unique(&qp, &queries)?;
        let dids = check_unique(&cp, &corpus)?;
        let relevant = read_qrels(&rp, (&qp, &qids), (&cp, &dids))?;
        let total = queries.len();
        let queries: Vec<(String, String)> = queries
            .into_iter()
            .filter(|(id, _)| relevant.contains_key(id))
            .collect();
        if queries.is_empty() {
            return Err(Error::file(
                &rp,
                "no query has a relevant document (score > 0)",
            ));
        }
        Ok(RetrievalSet {
            dropped_queries: total - queries.len(),
            queries,
            corpus,
            relevant,
        })
    }
}

/// query id -> its relevant (score > 0) documents; every id must exist.
fn read_qrels(
    rp: &Path,
    (qp, qids): (&Path, &HashSet<String>),
    (cp, dids): (&Path, &HashSet<String>),
) -> Result<HashMap<String, HashSet<String>>> {
    let qcol = pick(rp, &["query-id", "query_id"])?;
    let dcol = pick(rp, &["corpus-id", "doc_id"])?;
    let mut relevant: HashMap<String, HashSet<String>> = HashMap::new();
    let mut row = 0;
    for b in data::open(rp, &[qcol, dcol, "score"])? {
        let b = b?;
        let (q, d, s) = (b.ids(qcol)?, b.ids(dcol)?, b.labels("score")?);
        for ((q, d), s) in q.into_iter().zip(d).zip(s) {
            row += 1;
            if !qids.contains(&q) {
                return Err(Error::cell(
                    rp,
                    row,
                    qcol,
                    format!("unknown query '{q}' (not in {})", qp.display()),
                ));
            }
            if !dids.contains(&d) {
                return Err(Error::cell(
                    rp,
                    row,
                    dcol,
                    format!("unknown document '{d}' (not in {})", cp.display()),
                ));
            }
            if s > 0.0 {
                relevant.entry(q).or_default().insert(d);
            }
        }
    }
    Ok(relevant)
}
