//! Deterministic train/test splits any user can re-run: items ordered by xxh3 of their key with a
//! seed (ties by key), the first ones to train. The rule depends only on the keys and the seed, not
//! on file order or the machine. Retrieval folders split by query; pair files split by row.
use super::retrieval::{find_file, RetrievalSet};
use crate::data::write_parquet;
use crate::error::{Context, Error, Result};
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

/// How a retrieval folder's judged queries are parted.
#[derive(Clone, Copy, Debug)]
pub enum QueryParts {
    /// The first n (in hash order) to train, the rest to test.
    Train(usize),
    /// round(n x f) to test, the rest to train (works on any folder, whatever its size).
    TestFraction(f64),
    /// k folds: fold i's queries to test in `out/fold-i`, every other fold's to its train.
    Folds(usize),
}

/// What a retrieval split wrote: (folder, train queries, test queries) for each part.
pub struct RetrievalSplit {
    pub parts: Vec<(std::path::PathBuf, usize, usize)>,
}

/// Split a retrieval folder by query: its judged queries (those of qrels split `split` where
/// given: a train part carved again into dev folds) in hash order, parted as `how` says, each
/// part written as a folder of its own: the queries and corpus files copied unchanged,
/// `qrels/train.parquet` and `qrels/test.parquet` with binary judgements (score 1 for each
/// relevant document: the relevance `evaluate` and `mine` use). Evaluate with `--split test`,
/// mine and train on `--split train`.
pub fn split_retrieval(
    dir: &Path,
    split: Option<&str>,
    out: &Path,
    how: QueryParts,
    seed: u64,
) -> Result<RetrievalSplit> {
    let set = RetrievalSet::load_split(dir, split)?;
    let ids: Vec<&str> = set.queries.iter().map(|(id, _)| id.as_str()).collect();
    let n = ids.len();
    let order = hash_order(&ids, seed);
    // each part: its folder and its test positions in hash order (the rest are its train)
    let parts: Vec<(std::path::PathBuf, std::ops::Range<usize>)> = match how {
        QueryParts::Train(t) => vec![(out.to_path_buf(), t.min(n)..n)],
        QueryParts::TestFraction(f) => {
            if !(f > 0.0 && f < 1.0) {
                return Err(Error::msg(format!(
                    "--test-fraction {f}: must lie strictly between 0 and 1"
                )));
            }
            let test = (n as f64 * f).round() as usize;
            vec![(out.to_path_buf(), n - test..n)]
        }
        QueryParts::Folds(k) => {
            if k < 2 || k > n {
                return Err(Error::msg(format!(
                    "--folds {k}: needs 2 to {n} folds for the folder's {n} judged queries"
                )));
            }
            (0..k)
                .map(|i| (out.join(format!("fold-{i}")), i * n / k..(i + 1) * n / k))
                .collect()
        }
    };
    let mut wrote = Vec::new();
    for (folder, test) in parts {
        if test.is_empty() || test.len() == n {
            return Err(Error::msg(format!(
                "{how:?}: the folder has {n} judged queries; both splits need some"
            )));
        }
        let train: Vec<usize> = (0..n)
            .filter(|i| !test.contains(i))
            .map(|i| order[i])
            .collect();
        let tested: Vec<usize> = test.clone().map(|i| order[i]).collect();
        write_part(
            dir,
            &folder,
            &set,
            &ids,
            [("train", &train), ("test", &tested)],
        )?;
        wrote.push((folder, train.len(), tested.len()));
    }
    Ok(RetrievalSplit { parts: wrote })
}

/// One part's folder: the queries and corpus copied, and its qrels splits.
fn write_part(
    dir: &Path,
    out: &Path,
    set: &RetrievalSet,
    ids: &[&str],
    splits: [(&str, &Vec<usize>); 2],
) -> Result<()> {
    std::fs::create_dir_all(out.join("qrels")).in_file(out)?;
    for stem in ["queries", "corpus"] {
        let src = find_file(dir, stem)?;
        let name = src.file_name().expect("a file name");
        std::fs::copy(&src, out.join(name)).in_file(&src)?;
    }
    for (name, part) in splits {
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
    Ok(())
}

/// What a file split wrote.
pub struct FileSplit {
    pub train_rows: usize,
    pub test_rows: usize,
}

/// Split a dataset file's rows into `out/train.parquet` and `out/test.parquet`: rows in hash order
/// of their key (the `key` columns' texts joined by U+001F), the first `n - round(n * test_fraction)`
/// to train, the rest to test; each file keeps the input's row order and every column. Rows with
/// the same key sort by input position, so the rule stays deterministic with duplicates.
pub fn split_file(
    input: &Path,
    out: &Path,
    key: &[&str],
    test_fraction: f64,
    seed: u64,
) -> Result<FileSplit> {
    if !(test_fraction > 0.0 && test_fraction < 1.0) {
        return Err(Error::msg(format!(
            "--test-fraction {test_fraction}: must lie strictly between 0 and 1"
        )));
    }
    let names = super::column_names(input)?;
    let cols: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut batches = Vec::new();
    let mut keys: Vec<String> = Vec::new();
    for b in super::open(input, &cols)? {
        let b = b?;
        let texts = key.iter().map(|c| b.texts(c)).collect::<Result<Vec<_>>>()?;
        keys.extend((0..b.num_rows()).map(|i| {
            texts
                .iter()
                .map(|t| t[i])
                .collect::<Vec<_>>()
                .join("\u{1f}")
        }));
        batches.push(b.data);
    }
    let n = keys.len();
    let test = (n as f64 * test_fraction).round() as usize;
    if test == 0 || test == n {
        return Err(Error::file(
            input,
            format!("{n} rows: --test-fraction {test_fraction} leaves one split empty"),
        ));
    }
    let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    let order = hash_order(&refs, seed);
    let mut to_train = vec![false; n];
    for &i in &order[..n - test] {
        to_train[i] = true;
    }
    let schema = batches[0].schema();
    let all = arrow_select::concat::concat_batches(&schema, &batches)
        .map_err(|e| Error::file(input, e))?;
    std::fs::create_dir_all(out).in_file(out)?;
    for (name, want) in [("train", true), ("test", false)] {
        let idx: Vec<u32> = (0..n as u32)
            .filter(|&i| to_train[i as usize] == want)
            .collect();
        let take = arrow_array::UInt32Array::from(idx);
        let part = arrow_select::take::take_record_batch(&all, &take)
            .map_err(|e| Error::file(input, e))?;
        write_parquet(
            &out.join(format!("{name}.parquet")),
            schema.clone(),
            [&part],
        )?;
    }
    Ok(FileSplit {
        train_rows: n - test,
        test_rows: test,
    })
}
