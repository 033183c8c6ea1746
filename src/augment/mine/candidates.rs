//! Candidate negatives for each anchor: the top k of the corpus by the bi-encoder (exact cosine
//! search, or an index's candidates scored exactly), by BM25, or the union of both ranked by the
//! bi-encoder; and the same retriever's score for each of the anchor's positives (the margins'
//! reference without a cross-encoder).
use super::options::{Candidates, MineOptions, Miners};
use crate::augment::Bm25;
use crate::error::{Error, Result};
use crate::model::Embeddings;
use crate::search::{indexed_corpus, score_pair, search, IndexedCorpus, ScoreFn};
use indicatif::ProgressBar;
use rayon::prelude::*;

pub struct Found {
    /// Per anchor, (corpus index, score) of its top candidates (positives included).
    pub candidates: Vec<Vec<(usize, f32)>>,
    /// Per anchor, the score of each of its positives, in `positives` order.
    pub positive_scores: Vec<Vec<f32>>,
}

/// The cosine as the search ranks by it (search/score.rs), so mined scores are search's.
fn cosine(a: &[f32], b: &[f32]) -> f32 {
    score_pair(ScoreFn::Cosine, a, b)
}

/// The corpus side, built once: its embeddings and/or its BM25 index.
pub struct CorpusIndex<'c> {
    embedded: Option<Embeddings>,
    ann: Option<IndexedCorpus>,
    bm25: Option<Bm25<'c>>,
    ids: Vec<String>,
}

impl<'c> CorpusIndex<'c> {
    pub fn build(
        corpus: &[&'c str],
        models: &Miners,
        o: &MineOptions,
        progress: &ProgressBar,
    ) -> Result<CorpusIndex<'c>> {
        let mut ann = None;
        let embedded = match (o.candidates, models.encoder) {
            (Candidates::Bm25, _) => None,
            (_, Some(enc)) => Some(match (models.stored, models.index) {
                (Some(stored), Some((path, breadth))) => {
                    let (vectors, docs_of_row) = stored.lookup_rows(corpus)?;
                    ann = Some(indexed_corpus(path, stored, docs_of_row, breadth)?);
                    vectors
                }
                (Some(stored), None) => stored.lookup(corpus)?,
                (None, _) => {
                    progress.set_length(progress.length().unwrap_or(0) + corpus.len() as u64);
                    enc.encode_document(corpus, o.batch.batch_size, progress)?
                }
            }),
            (_, None) => {
                return Err(Error::msg(
                    "candidates by the bi-encoder need --model (or --candidates bm25)",
                ))
            }
        };
        let bm25 = (o.candidates != Candidates::BiEncoder).then(|| Bm25::new(corpus.to_vec()));
        Ok(CorpusIndex {
            embedded,
            ann,
            bm25,
            ids: (0..corpus.len()).map(|i| format!("{i:010}")).collect(),
        })
    }

    /// The top `k` candidates of each anchor, and its positives' scores.
    pub fn find(
        &self,
        anchors: &[&str],
        positives: &[Vec<usize>],
        models: &Miners,
        o: &MineOptions,
        k: usize,
        progress: &ProgressBar,
    ) -> Result<Found> {
        let queries = match (&self.embedded, models.encoder) {
            (Some(_), Some(enc)) => {
                Some(enc.encode_query(anchors, o.batch.batch_size, progress)?)
            }
            _ => None,
        };
        let embedded = queries.as_ref().zip(self.embedded.as_ref());
        let dense = |q: &Embeddings, c: &Embeddings| -> Result<Vec<Vec<(usize, f32)>>> {
            match &self.ann {
                Some(ann) => ann.search(
                    q,
                    c,
                    ScoreFn::Cosine,
                    k,
                    |_, _| false,
                    |a, b| self.ids[a].cmp(&self.ids[b]),
                ),
                None => Ok(search(q, c, &self.ids, ScoreFn::Cosine, k)),
            }
        };
        let lexical = |index: &Bm25| -> Vec<Vec<(usize, f32)>> {
            anchors
                .par_iter()
                .map(|a| {
                    let s = index.scores(a);
                    index
                        .ranked(a)
                        .into_iter()
                        .take(k)
                        .map(|d| (d, s[d]))
                        .collect()
                })
                .collect()
        };
        let candidates = match (embedded, &self.bm25) {
            (Some((q, c)), None) => dense(q, c)?,
            (None, Some(index)) => lexical(index),
            (Some((q, c)), Some(index)) => dense(q, c)?
                .into_iter()
                .zip(lexical(index))
                .enumerate()
                .map(|(a, (mut d, l))| {
                    for (doc, _) in l {
                        if !d.iter().any(|x| x.0 == doc) {
                            d.push((doc, cosine(q.row(a), c.row(doc))));
                        }
                    }
                    d
                })
                .collect(),
            (None, None) => unreachable!("bm25 is built whenever there are no embeddings"),
        };
        let positive_scores = positives
            .iter()
            .enumerate()
            .map(|(a, ps)| match (embedded, &self.bm25) {
                (Some((q, c)), _) => ps.iter().map(|&p| cosine(q.row(a), c.row(p))).collect(),
                (None, Some(index)) => {
                    let s = index.scores(anchors[a]);
                    ps.iter().map(|&p| s[p]).collect()
                }
                (None, None) => unreachable!(),
            })
            .collect();
        Ok(Found {
            candidates,
            positive_scores,
        })
    }
}
