use super::progress::out;
use crate::data::Io;
use crate::error::{Error, Result};
use crate::flags;
use crate::study::over_seeds::read_results;
use crate::study::pick::Choice;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// evaluate's results.csv (repeatable) holding every candidate model's dev result
    #[arg(long, required = true)]
    results: Vec<PathBuf>,
    /// The setting chosen: the key of the choice file (`lr` for --lr-from)
    #[arg(long)]
    setting: String,
    /// A candidate value and one model trained with it, VALUE=MODEL as named to evaluate
    /// (repeatable: a value's models, its seeds or sizes, are averaged)
    #[arg(long = "candidate", required = true, value_parser = parse_candidate)]
    candidates: Vec<(String, String)>,
    /// The dev dataset's name given to evaluate (never a test split)
    #[arg(long)]
    dataset: String,
    /// The metric compared (higher is better)
    #[arg(long, default_value = "spearman_cosine")]
    metric: String,
    /// The choice file (JSON): the value chosen and every candidate's mean +- sd
    #[arg(long = flags::OUT)]
    out: PathBuf,
}

fn parse_candidate(s: &str) -> std::result::Result<(String, String), String> {
    match s.split_once('=') {
        Some((v, m)) if !v.is_empty() && !m.is_empty() => Ok((v.to_string(), m.to_string())),
        _ => Err(format!("'{s}': expected VALUE=MODEL")),
    }
}

pub fn run(a: Args) -> Result<()> {
    if a.dataset.contains("test") {
        return Err(Error::msg(format!(
            "--dataset {}: a setting is chosen on dev data, never on a test split",
            a.dataset
        )));
    }
    let rows = read_results(&a.results)?;
    let choice = Choice::pick(&rows, &a.setting, &a.dataset, &a.metric, &a.candidates)?;
    choice.save(&a.out)?;
    out(&format!(
        "{}chose {}={}; wrote {}\n",
        choice.table(),
        choice.setting,
        choice.value,
        a.out.display()
    ));
    Ok(())
}

impl Args {
    pub fn io(&self) -> Io {
        Io::new()
            .inputs("--results", &self.results)
            .output("--out", &self.out)
    }
}
