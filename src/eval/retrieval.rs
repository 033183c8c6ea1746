//! Retrieval evaluation as sentence-transformers' InformationRetrievalEvaluator defines it: exact
//! search over the encoded corpus, hits ordered by (-score, doc id), queries without relevant
//! documents dropped, and accuracy/precision/recall@k, MRR@10, nDCG@10 (binary gains), MAP@100.
use super::evaluator::{EvalOptions, Evaluation, Evaluator, EvaluatorKind, Metrics, Model};
use super::ranking::{ndcg, ranking_metrics, MAP_AT, MRR_AT, NDCG_AT, PRECISION_RECALL_AT};
use super::vector_cache::VectorCache;
use crate::data::retrieval::RetrievalSet;
use crate::error::{Error, Result};
use crate::model::Embeddings;
use crate::search::{search_skipping, IndexedCorpus, ScoreFn, StoredCorpus};
use indicatif::ProgressBar;
use std::collections::HashSet;
use std::sync::Arc;

pub const KIND: EvaluatorKind = EvaluatorKind {
    flag: "retrieval",
    task: "retrieval",
    headline: &["ndcg@10", "mrr@10", "recall@100", "map@100"],
    help:
        "retrieval folders (queries, corpus, qrels) as NAME=DIR: nDCG@10, MRR@10, recall@k, MAP@100",
    load: |path, opts| Ok(Box::new(RetrievalEvaluator::read(path, opts)?)),
};

pub struct RetrievalEvaluator {
    pub set: RetrievalSet,
    pub score_fn: ScoreFn,
    pub ignore_identical_ids: bool,
    pub stored: Option<Arc<StoredCorpus>>,
    pub vector_cache: Option<VectorCache>,
}

impl RetrievalEvaluator {
    pub fn read(dir: &std::path::Path, opts: &EvalOptions) -> Result<RetrievalEvaluator> {
        Ok(RetrievalEvaluator {
            set: RetrievalSet::load_split(dir, opts.split.as_deref())?,
            score_fn: opts.score_fn,
            ignore_identical_ids: opts.ignore_identical_ids,
            stored: opts.corpus_embeddings.clone(),
            vector_cache: opts.vector_cache.clone(),
        })
    }
}

impl Evaluator for RetrievalEvaluator {
    fn kind(&self) -> &'static EvaluatorKind {
        &KIND
    }

    fn run(&self, model: &Model, batch: usize, progress: &ProgressBar) -> Result<Evaluation> {
        let Model::Encoder { enc, folder, .. } = model else {
            return Err(Error::msg(
                "retrieval evaluation needs a sentence encoder (a cross-encoder only reranks)",
            ));
        };
        let set = &self.set;
        let q: Vec<&str> = set.queries.iter().map(|(_, t)| t.as_str()).collect();
        let c: Vec<&str> = set.corpus.iter().map(|(_, t)| t.as_str()).collect();
        let (ce, index) = match (&self.stored, &self.vector_cache, folder) {
            (Some(stored), ..) => stored.vectors(&c)?,
            (None, Some(cache), Some(folder)) => (
                cache.document_vectors(enc, folder, &c, batch, progress)?,
                None,
            ),
            _ => {
                progress.set_length(c.len() as u64);
                (enc.encode_document(&c, batch, progress)?, None)
            }
        };
        progress.set_length(progress.length().unwrap_or(0) + q.len() as u64);
        let qe = enc.encode_query(&q, batch, progress)?;
        let primary = format!("{}_ndcg@{NDCG_AT}", self.score_fn.name());
        let (metrics, per_query) = retrieval_metrics(
            set,
            &qe,
            &ce,
            self.score_fn,
            self.ignore_identical_ids,
            index.as_ref(),
        )?;
        let mut e = Evaluation::new(primary, metrics)?;
        e.per_query = per_query;
        Ok(e)
    }
}

/// Search and score a whole retrieval set from its query and corpus embeddings;
/// `ignore_identical_ids`: a document whose id is the query's is never a hit (BEIR's option, for
/// sets whose queries are corpus documents); `index`: candidates from an index, scored exactly.
/// Also each query's nDCG@10, by query id.
pub fn retrieval_metrics(
    set: &RetrievalSet,
    q: &Embeddings,
    c: &Embeddings,
    score: ScoreFn,
    ignore_identical_ids: bool,
    index: Option<&IndexedCorpus>,
) -> Result<(Metrics, Vec<(String, f64)>)> {
    let doc_ids: Vec<String> = set.corpus.iter().map(|(id, _)| id.clone()).collect();
    let depth = PRECISION_RECALL_AT
        .iter()
        .chain(&[MAP_AT, MRR_AT, NDCG_AT])
        .copied()
        .max()
        .unwrap();
    let skip = |qi: usize, d: usize| ignore_identical_ids && set.queries[qi].0 == doc_ids[d];
    let ranked_idx = match index {
        Some(ix) => ix.search(q, c, score, depth, skip, |a, b| doc_ids[a].cmp(&doc_ids[b]))?,
        None => search_skipping(q, c, &doc_ids, score, depth, skip),
    };
    let ranked: Vec<Vec<&str>> = ranked_idx
        .iter()
        .map(|r| r.iter().map(|&(d, _)| doc_ids[d].as_str()).collect())
        .collect();
    let relevant: Vec<&HashSet<String>> = set
        .queries
        .iter()
        .map(|(id, _)| &set.relevant[id])
        .collect();
    let per_query = (set.queries.iter().zip(&ranked).zip(&relevant))
        .map(|(((id, _), r), rel)| (id.clone(), ndcg(r, rel)))
        .collect();
    Ok((ranking_metrics(&ranked, &relevant, score.name()), per_query))
}
