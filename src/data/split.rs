//! Deterministic train/test splits any user can re-run: items ordered by xxh3 of their key with a
//! seed (ties by key), the first ones to train. The rule depends only on the keys and the seed, not
//! on file order or the machine.
use crate::data::write_parquet;
use crate::error::{Context, Error, Result};
use crate::eval::retrieval::RetrievalSet;
use arrow_array::{ArrayRef, Float32Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use std::path::Path;
use std::sync::Arc;
use xxhash_rust::xxh3::xxh3_64_with_seed;

/// Indices of `keys` in split order: by (xxh3(key, seed), key).
pub fn hash_order(keys: &[&str], seed: u64) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..keys.len()).collect();
    idx.sort_by_key(|&i| (xxh3_64_with_seed(keys[i].as_bytes(), seed), keys[i]));
    idx
}

/// What a retrieval split wrote.
pub struct RetrievalSplit {
    pub train_queries: usize,
    pub test_queries: usize,
}

/// Split a retrieval folder by query: its queries with a relevant document in hash order, the
/// first `train` of them to `out/qrels/train.parquet`, the rest to `out/qrels/test.parquet`; the
/// queries and corpus files are copied unchanged; judgements become binary (score 1 for each
/// relevant document: the relevance `evaluate` and `mine` use). Evaluate with `--split test`, mine and train on
/// `--split train`.
pub fn split_retrieval(dir: &Path, out: &Path, train: usize, seed: u64) -> Result<RetrievalSplit> {
    let set = RetrievalSet::load(dir)?;
    let ids: Vec<&str> = set.queries.iter().map(|(id, _)| id.as_str()).collect();
    if train == 0 || train >= ids.len() {
        return Err(Error::msg(format!(
            "--train-queries {train}: the folder has {} queries with a relevant document; both splits need some",
            ids.len()
        )));
    }
    let order = hash_order(&ids, seed);
    std::fs::create_dir_all(out.join("qrels")).in_file(out)?;
    for stem in ["queries", "corpus"] {
        let src = crate::eval::retrieval::find_file(dir, stem)?;
        let name = src.file_name().expect("a file name");
        std::fs::copy(&src, out.join(name)).in_file(&src)?;
    }
    for (name, part) in [("train", &order[..train]), ("test", &order[train..])] {
        let mut rows: Vec<(&str, &str)> = Vec::new();
        for &q in part {
            let mut docs: Vec<&String> = set.relevant[ids[q]].iter().collect();
            docs.sort();
            rows.extend(docs.into_iter().map(|d| (ids[q], d.as_str())));
        }
        let schema = Arc::new(Schema::new(vec![
            Field::new("query_id", DataType::Utf8, false),
            Field::new("doc_id", DataType::Utf8, false),
            Field::new("score", DataType::Float32, false),
        ]));
        let cols: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0))),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1))),
            Arc::new(Float32Array::from(vec![1.0; rows.len()])),
        ];
        let dest = out.join("qrels").join(format!("{name}.parquet"));
        let batch =
            RecordBatch::try_new(schema.clone(), cols).map_err(|e| Error::file(&dest, e))?;
        write_parquet(&dest, schema, [&batch])?;
    }
    Ok(RetrievalSplit {
        train_queries: train,
        test_queries: ids.len() - train,
    })
}
