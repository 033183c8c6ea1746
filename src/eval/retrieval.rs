//! Retrieval evaluation as sentence-transformers' InformationRetrievalEvaluator defines it: exact
//! search over the encoded corpus, hits ordered by (-score, doc id), queries without relevant
//! documents dropped, and accuracy/precision/recall@k, MRR@10, nDCG@10 (binary gains), MAP@100.
use super::Metrics;
use crate::data;
use crate::error::{Error, Result};
use crate::model::Embeddings;
use rayon::prelude::*;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

pub const ACCURACY_AT: [usize; 4] = [1, 3, 5, 10];
pub const PRECISION_RECALL_AT: [usize; 5] = [1, 3, 5, 10, 100];
pub const MRR_AT: usize = 10;
pub const NDCG_AT: usize = 10;
pub const MAP_AT: usize = 100;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScoreFn {
    Cosine,
    Dot,
}

impl ScoreFn {
    pub fn name(self) -> &'static str {
        match self {
            ScoreFn::Cosine => "cosine",
            ScoreFn::Dot => "dot",
        }
    }
}

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

/// The top `k` corpus indices for each query, ordered by (-score, doc id).
pub fn search(
    q: &Embeddings,
    c: &Embeddings,
    doc_ids: &[String],
    score: ScoreFn,
    k: usize,
) -> Vec<Vec<usize>> {
    let norms = |e: &Embeddings| -> Vec<f32> {
        (0..e.len())
            .map(|i| {
                if score == ScoreFn::Cosine {
                    e.row(i)
                        .iter()
                        .map(|x| x * x)
                        .sum::<f32>()
                        .sqrt()
                        .max(1e-12)
                } else {
                    1.0
                }
            })
            .collect()
    };
    let (qn, cn) = (norms(q), norms(c));
    (0..q.len())
        .into_par_iter()
        .map(|qi| {
            let qr = q.row(qi);
            let mut hits: Vec<(f32, usize)> = (0..c.len())
                .map(|d| {
                    (
                        qr.iter().zip(c.row(d)).map(|(a, b)| a * b).sum::<f32>() / (qn[qi] * cn[d]),
                        d,
                    )
                })
                .collect();
            let order = |a: &(f32, usize), b: &(f32, usize)| {
                b.0.total_cmp(&a.0)
                    .then_with(|| doc_ids[a.1].cmp(&doc_ids[b.1]))
            };
            if hits.len() > k {
                hits.select_nth_unstable_by(k - 1, order);
                hits.truncate(k);
            }
            hits.sort_by(order);
            hits.into_iter().map(|(_, d)| d).collect()
        })
        .collect()
}

fn dcg(gains: impl Iterator<Item = f64>) -> f64 {
    gains
        .enumerate()
        .map(|(i, g)| g / ((i + 2) as f64).log2())
        .sum()
}

/// Ranking metrics over queries: `ranked[q]` holds doc ids best first (at least 100 deep where
/// the corpus allows), `relevant[q]` that query's relevant ids. Names as sentence-transformers'.
pub fn ranking_metrics(
    ranked: &[Vec<&str>],
    relevant: &[&HashSet<String>],
    prefix: &str,
) -> Metrics {
    let n = ranked.len() as f64;
    let mean = |f: &dyn Fn(&[&str], &HashSet<String>) -> f64| {
        ranked
            .iter()
            .zip(relevant)
            .map(|(r, rel)| f(r, rel))
            .sum::<f64>()
            / n
    };
    let hits = |r: &[&str], rel: &HashSet<String>, k: usize| {
        r.iter().take(k).filter(|d| rel.contains(**d)).count() as f64
    };
    let mut m = Metrics::new();
    for k in ACCURACY_AT {
        m.push((
            format!("{prefix}_accuracy@{k}"),
            mean(&|r, rel| (hits(r, rel, k) > 0.0) as u8 as f64),
        ));
    }
    for k in PRECISION_RECALL_AT {
        m.push((
            format!("{prefix}_precision@{k}"),
            mean(&|r, rel| hits(r, rel, k) / k as f64),
        ));
        m.push((
            format!("{prefix}_recall@{k}"),
            mean(&|r, rel| hits(r, rel, k) / rel.len() as f64),
        ));
    }
    m.push((
        format!("{prefix}_mrr@{MRR_AT}"),
        mean(&|r, rel| {
            r.iter()
                .take(MRR_AT)
                .position(|d| rel.contains(*d))
                .map_or(0.0, |p| 1.0 / (p + 1) as f64)
        }),
    ));
    m.push((
        format!("{prefix}_ndcg@{NDCG_AT}"),
        mean(&|r, rel| {
            let got = dcg(r
                .iter()
                .take(NDCG_AT)
                .map(|d| rel.contains(*d) as u8 as f64));
            got / dcg(std::iter::repeat_n(1.0, rel.len().min(NDCG_AT)))
        }),
    ));
    m.push((
        format!("{prefix}_map@{MAP_AT}"),
        mean(&|r, rel| {
            let (mut correct, mut sum) = (0.0, 0.0);
            for (rank, d) in r.iter().take(MAP_AT).enumerate() {
                if rel.contains(*d) {
                    correct += 1.0;
                    sum += correct / (rank + 1) as f64;
                }
            }
            sum / rel.len().min(MAP_AT) as f64
        }),
    ));
    m
}

/// Search and score a whole retrieval set from its query and corpus embeddings.
pub fn retrieval_metrics(
    set: &RetrievalSet,
    q: &Embeddings,
    c: &Embeddings,
    score: ScoreFn,
) -> Metrics {
    let doc_ids: Vec<String> = set.corpus.iter().map(|(id, _)| id.clone()).collect();
    let depth = PRECISION_RECALL_AT
        .iter()
        .chain(&[MAP_AT, MRR_AT, NDCG_AT])
        .copied()
        .max()
        .unwrap();
    let ranked_idx = search(q, c, &doc_ids, score, depth);
    let ranked: Vec<Vec<&str>> = ranked_idx
        .iter()
        .map(|r| r.iter().map(|&d| doc_ids[d].as_str()).collect())
        .collect();
    let relevant: Vec<&HashSet<String>> = set
        .queries
        .iter()
        .map(|(id, _)| &set.relevant[id])
        .collect();
    ranking_metrics(&ranked, &relevant, score.name())
}
