//! A cosine similarity matrix of sentences under one or more models, and its heatmap (the SBERT
//! article's figure).
use super::metrics::cosine;
use crate::error::Result;
use crate::model::SentenceEncoder;
use crate::plot::{heatmap, Figure};
use indicatif::ProgressBar;
use std::path::Path;

/// Cosine similarity of every pair of `sentences` under `enc`, (n, n).
pub fn matrix(enc: &SentenceEncoder, sentences: &[&str]) -> Result<Vec<Vec<f64>>> {
    let e = enc.encode(sentences, 32, &ProgressBar::hidden())?;
    let n = e.len();
    Ok((0..n)
        .map(|i| (0..n).map(|j| cosine(e.row(i), e.row(j))).collect())
        .collect())
}

/// Short labels "1: first words…" for the heatmap's axes.
pub fn labels(sentences: &[&str]) -> Vec<String> {
    sentences
        .iter()
        .enumerate()
        .map(|(i, s)| format!("{}: {}", i + 1, short(s, 28)))
        .collect()
}

fn short(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        s.chars().take(n - 1).collect::<String>() + "…"
    }
}

/// The matrix as a text table (rows and columns numbered as the labels).
pub fn table(title: &str, m: &[Vec<f64>]) -> String {
    use std::fmt::Write;
    let mut t = format!("{title}:\n{:>4}", "");
    for j in 0..m.len() {
        let _ = write!(t, " {:>6}", j + 1);
    }
    for (i, row) in m.iter().enumerate() {
        let _ = write!(t, "\n{:>4}", i + 1);
        for v in row {
            let _ = write!(t, " {v:>6.3}");
        }
    }
    t.push('\n');
    t
}

/// `stem.svg` and `stem.png`: the heatmap of one model's matrix.
pub fn save_heatmap(title: &str, labels: &[String], m: &[Vec<f64>], stem: &Path) -> Result<()> {
    heatmap(title, labels, m, 2).save(stem)
}
