//! Pairs from real queries without judgments (`augment --corpus C --queries Q`, issue 34): many
//! users have a search log but no relevance labels. Each query is paired with its top documents
//! by a first-stage retriever: BM25 (k1 1.2, b 0.75), the model to be adapted (exact cosine), or
//! both fused by reciprocal rank (RRF, k = 60, over each one's top 100: a document both rank high
//! wins, so one retriever's blind spot weighs less). The pairs feed `train-biencoder --loss mnr
//! --columns anchor,positive` as pseudo-query pairs do.
use super::Bm25;
use crate::data::retrieval::{find_file, read_texts, RetrievalSet};
use crate::error::{Error, Result};
use crate::model::InferenceOptions;
use crate::search::{search, ScoreFn};
use indicatif::ProgressBar;
use rayon::prelude::*;
use std::path::{Path, PathBuf};

/// How an unjudged query's positives are found (`augment --positives`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum QueryPositives {
    /// The top documents by BM25
    Bm25,
    /// The top documents by --retriever's cosine
    Model,
    /// BM25's and --retriever's rankings fused by reciprocal rank
    Fused,
}

impl QueryPositives {
    pub fn name(self) -> String {
        use clap::ValueEnum;
        self.to_possible_value()
            .expect("no variant is skipped")
            .get_name()
            .to_string()
    }
}

/// RRF's constant (Cormack et al. 2009) and the depth of each ranking it fuses.
const RRF_K: f64 = 60.0;
const DEPTH: usize = 100;

/// `augment --queries`'s flags (with `--corpus`).
#[derive(Clone, Debug, clap::Args, serde::Serialize)]
pub struct QuerySpec {
    /// Real queries without judgments, each paired with its top documents in --corpus instead of
    /// pseudo-queries: a queries file (id, text) or a retrieval folder's queries
    #[arg(long, requires = "corpus",
          conflicts_with_all = ["pseudo", "crops", "crop_min", "crop_max", "crop_min_words", "seed"])]
    pub queries: Option<PathBuf>,
    /// With a retrieval folder as --queries: only the queries judged in this qrels split, their
    /// judgments unread (a study's train queries held without their labels)
    #[arg(long, requires = "queries")]
    pub query_split: Option<String>,
    /// How each query's positives are found
    #[arg(long, value_enum, default_value = "fused", requires = "queries")]
    pub positives: QueryPositives,
    /// The model whose ranking gives (model) or joins (fused) the positives: the one to adapt
    #[arg(long, requires = "queries")]
    pub retriever: Option<PathBuf>,
    /// Positives per query: its top documents
    #[arg(long, default_value_t = 1, requires = "queries",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=DEPTH as u64))]
    pub positives_per_query: usize,
}

impl QuerySpec {
    /// (id, text) of the queries asked for.
    fn read_queries(&self) -> Result<Vec<(String, String)>> {
        let q = self.queries.as_ref().expect("called with --queries");
        if !q.exists() {
            return Err(Error::file(q, "no such file or folder"));
        }
        match (q.is_dir(), &self.query_split) {
            (true, Some(split)) => Ok(RetrievalSet::load_split(q, Some(split))?.queries),
            (true, None) => read_texts(&find_file(q, "queries")?),
            (false, None) => read_texts(q),
            (false, Some(_)) => Err(Error::file(
                q,
                "--query-split picks a retrieval folder's queries; this is a file",
            )),
        }
    }

    /// (anchor, positive, doc_id, kind) rows: each query (in file order) with its positives.
    pub fn pairs(&self, corpus_file: &Path) -> Result<Vec<[String; 4]>> {
        let needs_model = self.positives != QueryPositives::Bm25;
        if needs_model != self.retriever.is_some() {
            return Err(Error::msg(format!(
                "--positives {}: {}",
                self.positives.name(),
                if needs_model {
                    "needs --retriever (the model to adapt)"
                } else {
                    "uses no model; --retriever would be ignored"
                }
            )));
        }
        let queries = self.read_queries()?;
        let corpus = read_texts(corpus_file)?;
        if corpus.is_empty() {
            return Err(Error::file(corpus_file, "no documents"));
        }
        let q: Vec<&str> = queries.iter().map(|(_, t)| t.as_str()).collect();
        let docs: Vec<&str> = corpus.iter().map(|(_, t)| t.as_str()).collect();
        let lexical = (self.positives != QueryPositives::Model).then(|| bm25_top(&q, &docs));
        let dense = match &self.retriever {
            Some(dir) => Some(model_top(dir, &q, &docs)?),
            None => None,
        };
        let kind = format!("query-{}", self.positives.name());
        let mut rows = Vec::new();
        for (i, query) in q.iter().enumerate() {
            let ranked = match (&lexical, &dense) {
                (Some(l), Some(d)) => fuse(&l[i], &d[i]),
                (Some(l), None) => l[i].clone(),
                (None, Some(d)) => d[i].clone(),
                (None, None) => unreachable!("bm25 or a model, checked above"),
            };
            for &doc in ranked.iter().take(self.positives_per_query) {
                let (id, text) = &corpus[doc];
                if text != query {
                    rows.push([query.to_string(), text.clone(), id.clone(), kind.clone()]);
                }
            }
        }
        Ok(rows)
    }
}

/// Each query's top documents by BM25, best first.
fn bm25_top(queries: &[&str], docs: &[&str]) -> Vec<Vec<usize>> {
    let index = Bm25::new(docs.to_vec());
    queries
        .par_iter()
        .map(|q| index.ranked(q).into_iter().take(DEPTH).collect())
        .collect()
}

/// Each query's top documents by the model's cosine, best first (as `evaluate` encodes).
fn model_top(dir: &Path, queries: &[&str], docs: &[&str]) -> Result<Vec<Vec<usize>>> {
    let enc = InferenceOptions::default().encoder(dir)?;
    let hidden = ProgressBar::hidden();
    let (qe, de) = (
        enc.encode(queries, 32, &hidden)?,
        enc.encode(docs, 32, &hidden)?,
    );
    let ids: Vec<String> = (0..docs.len()).map(|i| format!("{i:010}")).collect();
    Ok(search(&qe, &de, &ids, ScoreFn::Cosine, DEPTH)
        .into_iter()
        .map(|hits| hits.into_iter().map(|(d, _)| d).collect())
        .collect())
}

/// Reciprocal-rank fusion of two rankings (ranks from 1), best first, ties by document order.
pub fn fuse(a: &[usize], b: &[usize]) -> Vec<usize> {
    let mut score: std::collections::BTreeMap<usize, f64> = Default::default();
    for list in [a, b] {
        for (rank, &d) in list.iter().enumerate() {
            *score.entry(d).or_default() += 1.0 / (RRF_K + rank as f64 + 1.0);
        }
    }
    let mut fused: Vec<(usize, f64)> = score.into_iter().collect();
    fused.sort_by(|x, y| y.1.total_cmp(&x.1).then(x.0.cmp(&y.0)));
    fused.into_iter().map(|(d, _)| d).collect()
}

#[cfg(test)]
mod tests {
    use super::fuse;

    #[test]
    fn fusion_favours_documents_both_rankings_hold() {
        // 7 is second in both lists: 2/62 beats 1/61 (first in one list only)
        assert_eq!(fuse(&[3, 7, 1], &[5, 7, 2]), vec![7, 3, 5, 1, 2]);
        assert_eq!(fuse(&[1, 2], &[]), vec![1, 2]);
    }
}
