use super::eval_sets::EvalSets;
use super::model_opts::ModelOpts;
use super::progress::{self, out};
use condenser::error::{Error, Result};
use condenser::eval::choice::Choice;
use condenser::eval::choice_report::ChoiceReport;
use condenser::eval::over_seeds::{read_per_query, read_results, SeedReport};
use condenser::eval::{EvalOptions, EvalReport, EVALUATORS};
use condenser::flags::{self, InferenceBatch};
use condenser::recipe::State;
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct Args {
    /// evaluate's results.csv on dev sets (repeatable): `<method>-f<k>-s<seed>` models count on
    /// dev set `...-f<k>` only, `<method>-s<seed>` models on every one
    #[arg(long, required = true)]
    dev: Vec<PathBuf>,
    /// The metric that chooses
    #[arg(long, default_value = "cosine_ndcg@10")]
    metric: String,
    /// The stock model's folder: kept where no candidate beats it on dev
    #[arg(long)]
    baseline: PathBuf,
    /// Folders that hold each method's final models (`<method>-s<seed>`, trained on every train
    /// query), searched in order (repeatable; needed with a test set)
    #[arg(long = "models")]
    models: Vec<PathBuf>,
    /// Methods whose final models are read on test beside the chosen one, named before any
    /// choice (the label-free default, the simplest method with labels), comma-separated
    #[arg(long, value_delimiter = ',')]
    also: Vec<String>,
    /// The test set, read once for the chosen method and the stock model (as evaluate takes it);
    /// without one, the dev choice alone is reported and test stays unread
    #[command(flatten)]
    test: EvalSets,
    /// The qrels split of the test folder
    #[arg(long, default_value = "test")]
    split: String,
    /// A recipe's recipe_state.json (or its out folder): each candidate's wall time
    #[arg(long)]
    state: Option<PathBuf>,
    #[command(flatten)]
    batch: InferenceBatch,
    /// Folder for report.md, report.json and the chart
    #[arg(long = flags::OUT)]
    out: PathBuf,
    #[command(flatten)]
    model: ModelOpts,
}

pub fn run(a: Args) -> Result<()> {
    if !a.test.0.is_empty() && a.models.is_empty() {
        return Err(Error::msg(
            "--models: the folders of the final models to read on test",
        ));
    }
    let walls = match &a.state {
        Some(p) if p.is_file() => State::load(p.parent().unwrap_or(Path::new(".")))?.wall_times(),
        Some(dir) => State::load(dir)?.wall_times(),
        None => Vec::new(),
    };
    let wall = |m: &str| walls.iter().find(|(o, _)| o == Path::new(m)).map(|w| w.1);
    let dev = Choice::new(
        &read_results(&a.dev)?,
        &read_per_query(&a.dev, &a.metric)?,
        &a.metric,
        &a.baseline.to_string_lossy(),
        &wall,
    )?;
    out(&dev.markdown());
    if a.test.0.is_empty() {
        let r = ChoiceReport { dev, test: None };
        r.save(&a.out)?;
        out(&format!(
            "test not read (no test set given)\nwrote {}/report.{{md,json,svg,png}}\n",
            a.out.display()
        ));
        return Ok(());
    }
    // the stock model, then every final model (`<method>-s<seed>`) of the chosen method and of
    // the methods named beforehand with --also: test never decides which are read
    let mut finals = vec![a.baseline.clone()];
    let mut methods = vec![dev.chosen.clone()];
    methods.extend(a.also.iter().filter(|m| **m != dev.chosen).cloned());
    for m in methods.iter().filter(|m| **m != dev.baseline.method) {
        let found = final_models(&a.models, m)?;
        if found.is_empty() {
            return Err(Error::msg(format!(
                "no final model {m}-s<seed> in any --models folder"
            )));
        }
        finals.extend(found);
    }
    let opts = EvalOptions {
        split: Some(a.split.clone()),
        ..Default::default()
    };
    let (kind, set) = &a.test.0[0];
    let sets = vec![(
        set.name.clone(),
        (EVALUATORS[*kind].load)(&set.path, &opts)?,
    )];
    let bar = |m: &str, n: &str| progress::bar(Some(0), &format!("texts ({m} on {n})"));
    let report = EvalReport::run(
        &finals,
        &sets,
        &a.model.inference()?,
        a.batch.batch_size,
        bar,
    )?;
    let rows = read_rows(&report);
    let base = a.baseline.to_string_lossy();
    let test = SeedReport::new(&rows, &set.name, &a.metric, Some(&base), &wall)?;
    let r = ChoiceReport {
        dev,
        test: Some(test),
    };
    r.save(&a.out)?;
    out(&format!(
        "{}\nwrote {}/report.{{md,json,svg,png}}\n",
        r.test.as_ref().map_or(String::new(), SeedReport::markdown),
        a.out.display()
    ));
    Ok(())
}

/// evaluate's rows as `report` reads them from results.csv.
fn read_rows(r: &EvalReport) -> Vec<(String, String, String, f64)> {
    let mut rows = Vec::new();
    for e in &r.results {
        for (k, v) in &e.metrics {
            rows.push((e.model.clone(), e.dataset.clone(), k.clone(), *v));
        }
    }
    rows
}

/// Every `<method>-s<seed>` model folder in `dirs`, in seed order, the first folder holding a seed
/// winning.
fn final_models(dirs: &[PathBuf], method: &str) -> Result<Vec<PathBuf>> {
    let mut found: Vec<(u64, PathBuf)> = Vec::new();
    let prefix = format!("{method}-s");
    for d in dirs.iter().filter(|d| d.is_dir()) {
        for e in std::fs::read_dir(d).map_err(|e| Error::file(d, e))? {
            let p = e.map_err(|e| Error::file(d, e))?.path();
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
            let seed = name.as_deref().and_then(|n| n.strip_prefix(&prefix));
            if let Some(seed) = seed.and_then(|s| s.parse::<u64>().ok()) {
                if p.join("config.json").is_file() && !found.iter().any(|f| f.0 == seed) {
                    found.push((seed, p));
                }
            }
        }
    }
    found.sort();
    Ok(found.into_iter().map(|f| f.1).collect())
}
