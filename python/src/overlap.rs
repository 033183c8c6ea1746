//! `condenser.domain_overlap`: the Jaccard matrix of datasets' WordPiece n-gram sets, each a file
//! (read as `domain-overlap` reads it) or a list of texts, with the command's numbers.
use crate::call;
use condenser::overlap::{self, Mode, Options, OverlapReport, Source};
use condenser::tokenize::Tokenizer;
use pyo3::prelude::*;
use std::path::PathBuf;

/// A dataset: its texts, or its file.
#[derive(FromPyObject)]
pub enum Dataset {
    Texts(Vec<String>),
    File(PathBuf),
}

/// (names, jaccard rows, sizes, shared rows) of the datasets, in order.
#[pyfunction]
#[pyo3(signature = (names, datasets, tokenizer, n = 2, stride = 1, approx = None, seed = 42, show_progress = true))]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
pub fn overlap_matrix(
    py: Python<'_>,
    names: Vec<String>,
    datasets: Vec<Dataset>,
    tokenizer: PathBuf,
    n: usize,
    stride: usize,
    approx: Option<usize>,
    seed: u64,
    show_progress: bool,
) -> PyResult<(Vec<String>, Vec<Vec<f64>>, Vec<u64>, Vec<Vec<u64>>)> {
    let mode = match approx {
        Some(k) => Mode::Approx { num_perm: k, seed },
        None => Mode::Exact,
    };
    let opts = Options {
        ngram: n,
        stride,
        mode,
    };
    let tokenizer = condenser::model::folders::home::resolve(&tokenizer);
    let r: OverlapReport = call::run(py, !show_progress, || {
        let tok = Tokenizer::load(&tokenizer)?;
        let bar = condenser::cli::progress::bar(None, "rows");
        let all_files = datasets.iter().all(|d| matches!(d, Dataset::File(_)));
        let r = if all_files {
            let sources = names
                .iter()
                .zip(&datasets)
                .map(|(name, d)| match d {
                    Dataset::File(p) => Source::new(name.clone(), p.clone(), None),
                    Dataset::Texts(_) => unreachable!("all files"),
                })
                .collect::<condenser::Result<Vec<_>>>()?;
            overlap::compute(&sources, &tok, &opts, &bar)?
        } else {
            // files read into memory beside the lists, as the command reads them
            let named = names
                .iter()
                .zip(&datasets)
                .map(|(name, d)| {
                    let texts = match d {
                        Dataset::Texts(t) => t.clone(),
                        Dataset::File(p) => {
                            read_texts(&Source::new(name.clone(), p.clone(), None)?)?
                        }
                    };
                    Ok((name.clone(), texts))
                })
                .collect::<condenser::Result<Vec<_>>>()?;
            overlap::compute_texts(&named, &tok, &opts, &bar)?
        };
        bar.finish_and_clear();
        Ok(r)
    })?;
    let sizes = r.sizes.iter().map(|s| s.1).collect();
    Ok((r.names, r.jaccard, sizes, r.shared))
}

/// A dataset file's texts in the order the command reads them (each block's columns in turn).
fn read_texts(src: &Source) -> condenser::Result<Vec<String>> {
    let cols: Vec<&str> = src.columns.iter().map(String::as_str).collect();
    let mut out = Vec::new();
    let reader = condenser::data::open(&src.path, &cols)?;
    for batch in condenser::data::blocks(reader, 0..usize::MAX, condenser::data::BATCH_ROWS) {
        let batch = batch?;
        for c in &cols {
            out.extend(batch.texts(c)?.into_iter().map(str::to_string));
        }
    }
    Ok(out)
}
