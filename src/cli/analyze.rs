use super::model_opts::ModelOpts;
use super::named::short_name;
use super::progress::{self, out};
use crate::data::Io;
use crate::error::{Error, Result};
use crate::eval::cls_attention::{cls_attention_entropy, AttentionReport};
use crate::flags::InferenceBatch;
use std::path::PathBuf;

#[derive(clap::Subcommand)]
pub enum Analysis {
    /// Per layer, the mean entropy of `[CLS]`'s attention (over heads and sentences), several models
    /// side by side: the Condenser paper's analysis of how broadly `[CLS]` attends
    Attention(AttentionArgs),
}

#[derive(clap::Args)]
pub struct AttentionArgs {
    /// Model folders (repeatable)
    #[arg(value_parser = crate::model::folders::home::parse_model, long = "model", required = true)]
    models: Vec<PathBuf>,
    /// Sentences: a dataset with a text column, or plain text (.txt), one a line
    #[arg(long)]
    texts: PathBuf,
    #[arg(long, default_value = "text")]
    column: String,
    /// Use the first N texts
    #[arg(long, default_value_t = 1000)]
    limit: usize,
    #[command(flatten)]
    batch: InferenceBatch,
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
    let inference = a.model_opts.inference()?;
    let mut report = AttentionReport {
        models: Vec::new(),
        layers: Vec::new(),
        uniform: 0.0,
        texts: texts.len(),
    };
    for dir in &a.models {
        let enc = inference.encoder(dir)?;
        let bar = progress::bar(Some(texts.len() as u64), "texts");
        let e = cls_attention_entropy(&enc, &texts, a.batch.batch_size, &bar)?;
        bar.finish_and_clear();
        // the first model's tokenization sets the ceiling drawn
        if report.layers.is_empty() {
            report.uniform = e.uniform;
        }
        report.layers.push(e.layers);
        report.models.push(short_name(dir));
    }
    report.save(&a.out)?;
    out(&format!(
        "[CLS] attention entropy (nats; mean over heads and {} texts; uniform = {:.3})\n{}wrote {}\n{}\n",
        report.texts,
        report.uniform,
        report.to_csv()?.replace(',', "\t"),
        a.out.join("attention_entropy.csv").display(),
        a.model_opts.matmuls()
    ));
    Ok(())
}

impl Analysis {
    pub fn io(&self) -> Io {
        match self {
            Analysis::Attention(a) => Io::new()
                .inputs("--model", &a.models)
                .input("--texts", &a.texts)
                .output("--out", &a.out),
        }
    }
}
