use super::{out, ModelOpts};
use crate::data;
use crate::error::{Error, Result};
use crate::eval::metrics::cosine;
use crate::plot::heatmap;
use indicatif::ProgressBar;
use std::fmt::Write;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Model folders; one matrix and heatmap per model, side by side as in the SBERT article
    #[arg(long = "model", required = true)]
    models: Vec<PathBuf>,
    /// A file of sentences: plain text (one per line) or a dataset with a `text` column
    #[arg(long)]
    file: Option<PathBuf>,
    /// Output folder for similarity*.svg/png
    #[arg(long, default_value = "out/similarity")]
    out: PathBuf,
    #[command(flatten)]
    model_opts: ModelOpts,
    /// Sentences to compare
    sentences: Vec<String>,
}

fn read_sentences(a: &Args) -> Result<Vec<String>> {
    let mut s = a.sentences.clone();
    if let Some(f) = &a.file {
        s.extend(data::read_texts(f, "text", None)?);
    }
    if s.len() < 2 {
        return Err(Error::msg(
            "give at least two sentences (arguments or --file)",
        ));
    }
    Ok(s)
}

fn short(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        s.chars().take(n - 1).collect::<String>() + "…"
    }
}

pub fn run(a: Args) -> Result<()> {
    let sentences = read_sentences(&a)?;
    let refs: Vec<&str> = sentences.iter().map(String::as_str).collect();
    let labels: Vec<String> = sentences
        .iter()
        .enumerate()
        .map(|(i, s)| format!("{}: {}", i + 1, short(s, 28)))
        .collect();
    let mut text = String::new();
    for s in &labels {
        let _ = writeln!(text, "{s}");
    }
    for (m, dir) in a.models.iter().enumerate() {
        let enc = a.model_opts.load(dir)?;
        let e = enc.encode(&refs, 32, &ProgressBar::hidden())?;
        let n = e.len();
        let matrix: Vec<Vec<f64>> = (0..n)
            .map(|i| (0..n).map(|j| cosine(e.row(i), e.row(j))).collect())
            .collect();
        let _ = write!(text, "\ncosine similarity, {}:\n{:>4}", dir.display(), "");
        for j in 0..n {
            let _ = write!(text, " {:>6}", j + 1);
        }
        for (i, row) in matrix.iter().enumerate() {
            let _ = write!(text, "\n{:>4}", i + 1);
            for v in row {
                let _ = write!(text, " {v:>6.3}");
            }
        }
        text.push('\n');
        let stem = if a.models.len() == 1 {
            "similarity".to_string()
        } else {
            format!("similarity-{}", m + 1)
        };
        let name = dir
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        heatmap(&format!("cosine similarity: {name}"), &labels, &matrix, 2)
            .save(&a.out.join(stem))?;
    }
    out(&format!("{text}\nwrote heatmaps to {}\n", a.out.display()));
    Ok(())
}
