use super::progress::out;
use crate::data::Io;
use crate::error::Result;
use crate::flags;
use crate::recipe::State;
use crate::study::over_seeds::{read_results, SeedReport};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// evaluate's results.csv (repeatable): models named `<method>-s<seed>` are one method's seeds
    #[arg(long, required = true)]
    results: Vec<PathBuf>,
    /// The dataset name given to evaluate (e.g. cranfield-test)
    #[arg(long)]
    dataset: String,
    /// The metric to report
    #[arg(long, default_value = "cosine_ndcg@10")]
    metric: String,
    /// The method or model folder gains are measured against (zero-shot)
    #[arg(long)]
    baseline: Option<String>,
    /// A recipe's recipe_state.json (or its out folder): wall time of the steps that trained each model
    #[arg(long)]
    state: Option<PathBuf>,
    /// Folder for report.md, report.json and the bar chart (report.svg, report.png)
    #[arg(long = flags::OUT)]
    out: PathBuf,
}

pub fn run(a: Args) -> Result<()> {
    let rows = read_results(&a.results)?;
    let walls = match &a.state {
        // State::load takes the folder the state file lives in
        Some(p) if p.is_file() => {
            State::load(p.parent().unwrap_or(std::path::Path::new(".")))?.wall_times()
        }
        Some(dir) => State::load(dir)?.wall_times(),
        None => Vec::new(),
    };
    let wall = |model: &str| {
        walls
            .iter()
            .find(|(o, _)| o == &PathBuf::from(model))
            .map(|w| w.1)
    };
    let report = SeedReport::new(&rows, &a.dataset, &a.metric, a.baseline.as_deref(), &wall)?;
    report.save(&a.out)?;
    out(&format!(
        "{}\nwrote {}/report.{{md,json,svg,png}}\n",
        report.markdown(),
        a.out.display()
    ));
    Ok(())
}

impl Args {
    pub fn io(&self) -> Io {
        Io::new()
            .inputs("--results", &self.results)
            .inputs("--state", &self.state)
            .output("--out", &self.out)
    }
}
