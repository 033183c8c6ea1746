use super::model_opts::ModelOpts;
use super::named::short_name;
use super::progress::out;
use crate::data;
use crate::data::Io;
use crate::error::{Error, Result};
use crate::eval::similarity;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Model folders; one matrix and heatmap per model, side by side as in the SBERT article
    #[arg(value_parser = crate::model::folders::home::parse_model, long = "model", required = true)]
    models: Vec<PathBuf>,
    /// A file of sentences: plain text (.txt, one per line) or a dataset with a `text` column
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

pub fn run(a: Args) -> Result<()> {
    let mut sentences = a.sentences.clone();
    if let Some(f) = &a.file {
        sentences.extend(data::read_texts(f, "text", None)?);
    }
    if sentences.len() < 2 {
        return Err(Error::msg(
            "give at least two sentences (arguments or --file)",
        ));
    }
    let refs: Vec<&str> = sentences.iter().map(String::as_str).collect();
    let labels = similarity::labels(&refs);
    let mut text = labels.join("\n") + "\n";
    let inference = a.model_opts.inference()?;
    for (m, dir) in a.models.iter().enumerate() {
        let matrix = similarity::matrix(&inference.encoder(dir)?, &refs)?;
        text += "\n";
        text += &similarity::table(&format!("cosine similarity, {}", dir.display()), &matrix);
        let stem = if a.models.len() == 1 {
            "similarity".to_string()
        } else {
            format!("similarity-{}", m + 1)
        };
        let title = format!("cosine similarity: {}", short_name(dir));
        similarity::save_heatmap(&title, &labels, &matrix, &a.out.join(stem))?;
    }
    out(&format!(
        "{text}\nwrote heatmaps to {}\n{}\n",
        a.out.display(),
        a.model_opts.matmuls()
    ));
    Ok(())
}

impl Args {
    pub fn io(&self) -> Io {
        Io::new()
            .inputs("--model", &self.models)
            .inputs("--file", &self.file)
            .output("--out", &self.out)
    }
}
