use super::eval_sets::EvalSets;
use super::model_opts::ModelOpts;
use super::progress::{self, out};
use condenser::data::Io;
use condenser::error::{Error, Result};
use condenser::eval::choice::Choice;
use condenser::eval::choice_report::ChoiceReport;
use condenser::eval::finals;
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
    let walls = State::wall_times_at(a.state.as_deref())?;
    let wall = |m: &str| walls.iter().find(|(o, _)| o == Path::new(m)).map(|w| w.1);
    let (metric, base) = (&a.metric, a.baseline.to_string_lossy());
    let (results, per_query) = (read_results(&a.dev)?, read_per_query(&a.dev, metric)?);
    let dev = Choice::new(&results, &per_query, metric, &base, &wall)?;
    out(&dev.markdown());
    let test = match a.test.0.first() {
        None => None,
        Some((kind, set)) => {
            let (stock, chosen) = (&dev.baseline.method, &dev.chosen);
            let finals = finals::to_read(&a.baseline, stock, chosen, &a.also, &a.models)?;
            let opts = EvalOptions {
                split: Some(a.split.clone()),
                ..Default::default()
            };
            let load = EVALUATORS[*kind].load;
            let sets = vec![(set.name.clone(), load(&set.path, &opts)?)];
            let bar = |m: &str, n: &str| progress::bar(Some(0), &format!("texts ({m} on {n})"));
            let (inference, batch) = (a.model.inference()?, a.batch.batch_size);
            let report = EvalReport::run(&finals, &sets, &inference, batch, bar)?;
            let rows = report.rows();
            Some(SeedReport::new(
                &rows,
                &set.name,
                metric,
                Some(&base),
                &wall,
            )?)
        }
    };
    let r = ChoiceReport { dev, test };
    r.save(&a.out)?;
    out(&format!(
        "{}\nwrote {}/report.{{md,json,svg,png}}\n",
        r.test.as_ref().map_or(
            "test not read (no test set given)".into(),
            SeedReport::markdown
        ),
        a.out.display()
    ));
    Ok(())
}

impl Args {
    pub fn io(&self) -> Io {
        let io = Io::new()
            .inputs("--dev", &self.dev)
            .input("--baseline", &self.baseline)
            .inputs("--state", &self.state);
        let io = self.models.iter().fold(io, |io, m| io.root("--models", m));
        self.test.inputs(io).output("--out", &self.out)
    }
}
