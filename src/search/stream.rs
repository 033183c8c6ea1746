//! `search`: exact top-k retrieval of queries against stored corpus embeddings, the corpus
//! streamed from its files batch by batch (memory: the queries, their top lists and one batch,
//! whatever the corpus size), sharded by query like the other sharded commands. Rows are
//! (query_id, rank, doc_id, score), best first; equal scores keep corpus order.
use super::ann::AnnIndex;
use super::exact::TopK;
use super::queries::{id_column, Queries};
use super::score::{best, ranks_like, score_pair, ScoreFn};
use super::store::StoredEmbeddings;
use crate::data::{self, ParquetSink};
use crate::error::{Error, Result};
use crate::model::Embeddings;
use crate::shard::ShardRun;
use arrow_array::{Float32Array, RecordBatch, StringArray, UInt32Array};
use arrow_schema::{DataType, Field, Schema};
use indicatif::ProgressBar;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Queries per shard block: a shard is a run of whole blocks of the query list.
pub const QUERY_BLOCK: usize = 1024;

pub struct SearchSummary {
    pub queries: usize,
    pub docs: usize,
    pub rows: usize,
    pub dest: PathBuf,
    /// With an index: its breadth flag and value, and the seconds its search for candidates took
    /// (the rest reads and scores the store).
    pub index: Option<(&'static str, usize, f64)>,
}

impl SearchSummary {
    /// The command's summary line: what was searched, how, and where the run went.
    pub fn line(&self, k: usize, seconds: f64) -> String {
        format!(
            "{} queries x {} documents ({}), top {k}: {} rows -> {} in {seconds:.1} s",
            self.queries,
            self.docs,
            self.how(),
            self.rows,
            self.dest.display(),
        )
    }

    /// How the documents were found, for the command's summary line.
    pub fn how(&self) -> String {
        match self.index {
            Some((flag, b, s)) => {
                format!("index candidates ({flag} {b}) in {s:.2} s, scored exactly")
            }
            None => "exact, streamed".into(),
        }
    }
}

/// What a search keeps: each query's top `k` by `score`, found exactly or among an index's
/// candidates (the index, and its breadth).
pub struct Wanted<'a> {
    pub score: ScoreFn,
    pub k: usize,
    pub index: Option<(&'a AnnIndex, usize)>,
}

/// Per query, (corpus row, score) best first.
type Hits = Vec<Vec<(usize, f32)>>;
/// A search's hits, the documents it read, and the index's (breadth flag, breadth, seconds).
type Found = (Hits, usize, Option<(&'static str, usize, f64)>);

/// Search `queries` (this shard's blocks, or all) against `corpus`, writing the top `k` of each
/// to `out` (or the shard's file, with its manifest). `progress` counts documents.
pub fn search_stored(
    corpus: &StoredEmbeddings,
    queries: &Queries,
    wanted: &Wanted,
    out: &Path,
    shard: Option<&ShardRun>,
    progress: &ProgressBar,
) -> Result<SearchSummary> {
    let (score, k) = (wanted.score, wanted.k);
    if k == 0 {
        return Err(Error::msg("--top-k must be at least 1"));
    }
    let nq = queries.ids.len();
    let range = shard.map_or(0..nq, |s| s.shard.rows_in(nq, QUERY_BLOCK));
    let dim = queries.vectors.dim;
    if dim != corpus.meta.dim {
        return Err(Error::msg(format!(
            "the queries are {dim} wide, the corpus's vectors {}",
            corpus.meta.dim
        )));
    }
    let mine = Embeddings {
        dim,
        data: queries.vectors.data[range.start * dim..range.end * dim].to_vec(),
    };
    let tie = |a: usize, b: usize| a.cmp(&b);
    let (hits, docs, found_by) = match wanted.index {
        None => {
            let mut top = TopK::new(mine, score, k);
            let mut docs = 0;
            corpus.for_each(false, |first, b, v| {
                top.add(first, &v, &|_, _| false, &tie)?;
                docs = first + b.num_rows();
                progress.inc(b.num_rows() as u64);
                Ok(())
            })?;
            (top.finish(&tie), docs, None)
        }
        Some((index, breadth)) => rescored(corpus, index, breadth, &mine, score, k, progress)?,
    };
    let names = doc_ids(corpus, &hits)?;
    let dest = shard.map_or(out.to_path_buf(), |s| s.shard.file(out));
    let rows = write_run(&dest, &queries.ids[range.clone()], &hits, &names)?;
    if let Some(s) = shard {
        s.finish("search", &dest, nq, range.clone(), rows > 0)?;
    }
    Ok(SearchSummary {
        queries: range.len(),
        docs,
        rows,
        dest,
        index: found_by,
    })
}

/// The index's candidates for each query (twice `k`), scored exactly from the store's vectors as
/// it streams past (memory: the candidate lists, not the vectors), the best `k` kept.
fn rescored(
    corpus: &StoredEmbeddings,
    index: &AnnIndex,
    breadth: usize,
    q: &Embeddings,
    score: ScoreFn,
    k: usize,
    progress: &ProgressBar,
) -> Result<Found> {
    ranks_like(score, corpus.meta.normalize)?;
    let t0 = std::time::Instant::now();
    let rows = index.nearest(q, 2 * k, breadth)?;
    let walk = t0.elapsed().as_secs_f64();
    let mut wanted: HashMap<usize, Vec<usize>> = HashMap::new();
    for (qi, list) in rows.iter().enumerate() {
        for &r in list {
            wanted.entry(r).or_default().push(qi);
        }
    }
    let mut lists: Vec<Vec<(usize, f32)>> = vec![Vec::new(); q.len()];
    let dim = q.dim;
    let mut docs = 0;
    corpus.for_each(false, |first, b, v| {
        for r in 0..b.num_rows() {
            for &qi in wanted
                .get(&(first + r))
                .map(Vec::as_slice)
                .unwrap_or_default()
            {
                let s = score_pair(score, q.row(qi), &v[r * dim..(r + 1) * dim]);
                lists[qi].push((first + r, s));
            }
        }
        docs = first + b.num_rows();
        progress.inc(b.num_rows() as u64);
        Ok(())
    })?;
    let tie = |a: usize, b: usize| a.cmp(&b);
    let hits = lists.into_iter().map(|l| best(l, k, &tie)).collect();
    Ok((hits, docs, Some((index.breadth_flag(), breadth, walk))))
}

/// The id of each document some query found: the store's `id`/`_id` column, else its row.
fn doc_ids(
    corpus: &StoredEmbeddings,
    hits: &[Vec<(usize, f32)>],
) -> Result<HashMap<usize, String>> {
    let need: HashSet<usize> = hits.iter().flatten().map(|h| h.0).collect();
    let Some(col) = id_column(&corpus.files[0])? else {
        return Ok(need.into_iter().map(|d| (d, d.to_string())).collect());
    };
    let mut names = HashMap::with_capacity(need.len());
    let mut at = 0;
    for f in &corpus.files {
        for b in data::open(f, &[col.as_str()])? {
            let b = b?;
            let n = b.num_rows();
            if need.iter().any(|d| (at..at + n).contains(d)) {
                for (i, id) in b.ids(&col)?.into_iter().enumerate() {
                    if need.contains(&(at + i)) {
                        names.insert(at + i, id);
                    }
                }
            }
            at += n;
        }
    }
    Ok(names)
}

fn write_run(
    dest: &Path,
    query_ids: &[String],
    hits: &[Vec<(usize, f32)>],
    names: &HashMap<usize, String>,
) -> Result<usize> {
    let (mut q, mut rank, mut d, mut s) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (qid, list) in query_ids.iter().zip(hits) {
        for (r, (doc, score)) in list.iter().enumerate() {
            q.push(qid.as_str());
            rank.push(r as u32 + 1);
            d.push(names[doc].as_str());
            s.push(*score);
        }
    }
    if q.is_empty() {
        return Ok(0);
    }
    let schema = Arc::new(Schema::new(vec![
        Field::new("query_id", DataType::Utf8, false),
        Field::new("rank", DataType::UInt32, false),
        Field::new("doc_id", DataType::Utf8, false),
        Field::new("score", DataType::Float32, false),
    ]));
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(StringArray::from(q)),
            Arc::new(UInt32Array::from(rank)),
            Arc::new(StringArray::from(d)),
            Arc::new(Float32Array::from(s)),
        ],
    )
    .map_err(|e| Error::file(dest, e))?;
    let rows = batch.num_rows();
    let mut sink = ParquetSink::create(dest, schema)?;
    sink.write(&batch)?;
    sink.finish()?;
    Ok(rows)
}
