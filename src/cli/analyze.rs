use super::{out, progress, ModelOpts};
use crate::error::{Error, Result};
use crate::eval::attention::cls_attention_entropy;
use crate::plot::line_chart;
use std::fmt::Write;
use std::path::PathBuf;

#[derive(clap::Subcommand)]
pub enum Analysis {
    /// Per layer, the mean entropy of [CLS]'s attention (over heads and sentences), several models
    /// side by side: the Condenser paper's analysis of how broadly [CLS] attends
    Attention(AttentionArgs),
}

#[derive(clap::Args)]
pub struct AttentionArgs {
    /// Model folders (repeatable)
    #[arg(long = "model", required = true)]
    models: Vec<PathBuf>,
    /// Sentences: a dataset with a text column, or plain text, one a line
    #[arg(long)]
    texts: PathBuf,
    #[arg(long, default_value = "text")]
    column: String,
    /// Use the first N texts
    #[arg(long, default_value_t = 1000)]
    limit: usize,
    #[arg(long, default_value_t = 32)]
    batch_size: usize,
    /// Output folder: attention_entropy.csv and .svg/.png
    #[arg(long)]
    out: PathBuf,
    #[command(flatten)]
    model_opts: ModelOpts,
}

pub fn run(a: Analysis) -> Result<()> {
    match a {
        Analysis::Attention(a) => attention(a),
    }
}

fn attention(a: AttentionArgs) -> Result<()> {
    let texts = crate::data::read_texts(&a.texts, &a.column, Some(a.limit))?;
    if texts.is_empty() {
        return Err(Error::file(&a.texts, "no texts"));
    }
    let mut names = Vec::new();
    let mut rows: Vec<Vec<f64>> = Vec::new();
    let mut uniform = 0.0;
    for dir in &a.models {
        let enc = a.model_opts.load(dir)?;
        let bar = progress::bar(Some(texts.len() as u64), "texts");
        let e = cls_attention_entropy(&enc, &texts, a.batch_size, &bar)?;
        bar.finish_and_clear();
        // the first model's tokenization sets the ceiling drawn
        if rows.is_empty() {
            uniform = e.uniform;
        }
        rows.push(e.layers);
        names.push(
            dir.file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_else(|| dir.display().to_string()),
        );
    }
    let layers = rows.iter().map(|r| r.len()).max().unwrap_or(0);
    let mut csv = String::from("layer");
    for n in &names {
        let _ = write!(csv, ",{n}");
    }
    csv.push('\n');
    for l in 0..layers {
        let _ = write!(csv, "{}", l + 1);
        for r in &rows {
            let _ = write!(
                csv,
                ",{}",
                r.get(l).map(|v| format!("{v:.4}")).unwrap_or_default()
            );
        }
        csv.push('\n');
    }
    std::fs::create_dir_all(&a.out).map_err(|e| Error::file(&a.out, e))?;
    crate::data::write_atomic(&a.out.join("attention_entropy.csv"), csv.as_bytes())?;
    let mut series: Vec<(String, Vec<(f64, f64)>)> = names
        .iter()
        .zip(&rows)
        .map(|(n, r)| {
            (
                n.clone(),
                r.iter()
                    .enumerate()
                    .map(|(l, v)| ((l + 1) as f64, *v))
                    .collect(),
            )
        })
        .collect();
    series.push((
        "uniform over the tokens".into(),
        (1..=layers).map(|l| (l as f64, uniform)).collect(),
    ));
    line_chart("entropy of [CLS] attention (nats)", "layer", &series)
        .save(&a.out.join("attention_entropy"))?;
    out(&format!(
        "[CLS] attention entropy (nats; mean over heads and {} texts; uniform = {:.3})\n{}wrote {}\n",
        texts.len(),
        uniform,
        csv.replace(',', "\t"),
        a.out.join("attention_entropy.csv").display()
    ));
    Ok(())
}
