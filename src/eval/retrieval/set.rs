//! A retrieval folder: queries, corpus and relevance judgements (qrels), each a dataset file.
use crate::data;
use crate::error::{Error, Result};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

/// A retrieval folder: queries, corpus and relevance judgements.
#[derive(Clone, Debug, Default)]
pub struct RetrievalSet {
    /// (id, text) of the queries that have at least one relevant document.
    pub queries: Vec<(String, String)>,
    /// (id, text) with text = "title text" where a title column exists.
    pub corpus: Vec<(String, String)>,
    pub relevant: HashMap<String, HashSet<String>>,
    /// Queries dropped for having no relevant document.
    pub dropped_queries: usize,
}

/// `dir/stem.<ext>` for the first supported extension present.
fn find(dir: &Path, stem: &str) -> Result<PathBuf> {
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

fn read_texts(path: &Path, with_title: bool) -> Result<Vec<(String, String)>> {
    let has_title = with_title && data::column_names(path)?.iter().any(|c| c == "title");
    let cols: Vec<&str> = if has_title {
        vec!["id", "title", "text"]
    } else {
        vec!["id", "text"]
    };
    let mut out = Vec::new();
    for b in data::open(path, &cols)? {
        let b = b?;
        let ids = b.ids("id")?;
        let texts = b.texts("text")?;
        let titles = if has_title {
            b.texts("title")?
        } else {
            vec![""; ids.len()]
        };
        for ((id, t), title) in ids.into_iter().zip(texts).zip(titles) {
            let text = if title.is_empty() {
                t.trim().to_string()
            } else {
                format!("{title} {t}").trim().to_string()
            };
            out.push((id, text));
        }
    }
    Ok(out)
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

impl RetrievalSet {
    pub fn load(dir: &Path) -> Result<RetrievalSet> {
        let (qp, cp, rp) = (
            find(dir, "queries")?,
            find(dir, "corpus")?,
            find(dir, "qrels")?,
        );
        let queries = read_texts(&qp, false)?;
        let corpus = read_texts(&cp, true)?;
        let qids = check_unique(&qp, &queries)?;
        let dids = check_unique(&cp, &corpus)?;
        let mut relevant: HashMap<String, HashSet<String>> = HashMap::new();
        let mut row = 0;
        for b in data::open(&rp, &["query_id", "doc_id", "score"])? {
            let b = b?;
            let (q, d, s) = (b.ids("query_id")?, b.ids("doc_id")?, b.labels("score")?);
            for ((q, d), s) in q.into_iter().zip(d).zip(s) {
                row += 1;
                if !qids.contains(&q) {
                    return Err(Error::cell(
                        &rp,
                        row,
                        "query_id",
                        format!("unknown query '{q}' (not in {})", qp.display()),
                    ));
                }
                if !dids.contains(&d) {
                    return Err(Error::cell(
                        &rp,
                        row,
                        "doc_id",
                        format!("unknown document '{d}' (not in {})", cp.display()),
                    ));
                }
                if s > 0.0 {
                    relevant.entry(q).or_default().insert(d);
                }
            }
        }
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
