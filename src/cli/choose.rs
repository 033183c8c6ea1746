use super::eval_sets::EvalSets;
use super::model_opts::ModelOpts;
use super::progress::{self, out};
use crate::data::Io;
use crate::error::{Error, Result};
use crate::eval::{EvalOptions, EvalReport, EVALUATORS};
use crate::flags::{self, InferenceBatch, VectorCacheDir};
use crate::recipe::State;
use crate::study::choice::Choice;
use crate::study::choice_report::ChoiceReport;
use crate::study::finals;
use crate::study::loco::test_gains;
use crate::study::loco_shipped::Shipped;
use crate::study::over_seeds::{read_per_query, read_results, SeedReport};
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
    #[arg(value_parser = crate::model::folders::home::parse_model, long)]
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
    /// The rules a leave-one-collection-out study shipped (`condenser loco`'s loco.json): the
    /// rule with labels chooses, the zero-label rule names the pick for a user with no labels
    /// (read on test too), and each candidate's row says how often its dev and test gains agreed
    /// there. Without it: the highest dev gain beyond twice its standard error and sd, else the
    /// stock model
    #[arg(long)]
    rule_from: Option<PathBuf>,
    /// A recipe's recipe_state.json (or its out folder): each candidate's wall time
    #[arg(long)]
    state: Option<PathBuf>,
    #[command(flatten)]
    vectors: VectorCacheDir,
    #[command(flatten)]
    batch: InferenceBatch,
    /// Folder for report.md, report.json and the chart; test/ in it holds the test scores as
    /// evaluate writes them (results.csv, per_query.csv)
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
    let mut dev = Choice::new(&results, &per_query, metric, &base, &wall)?;
    let rules = a.rule_from.as_deref().map(Shipped::read).transpose()?;
    let label_free = match &rules {
        None => None,
        Some(r) => {
            let why = format!(
                "the zero-label rule set on the development collections ({})",
                r.collections.join(", ")
            );
            Some((r.apply(&mut dev)?, why))
        }
    };
    let agreement: Vec<(String, usize, usize)> = match &rules {
        None => Vec::new(),
        Some(r) => (dev.candidates.iter())
            .filter_map(|c| {
                r.agreement(&c.method)
                    .map(|(s, n)| (c.method.clone(), s, n))
            })
            .collect(),
    };
    out(&dev.markdown());
    let test = match a.test.0.first() {
        None => None,
        Some((kind, set)) => {
            let (stock, chosen) = (&dev.baseline.method, &dev.chosen);
            let mut also = a.also.clone();
            also.extend(label_free.iter().map(|l| l.0.clone()));
            let finals = finals::to_read(&a.baseline, stock, chosen, &also, &a.models)?;
            let opts = EvalOptions {
                split: Some(a.split.clone()),
                vector_cache: a.vectors.cache(),
                ..Default::default()
            };
            let load = EVALUATORS[*kind].load;
            let sets = vec![(set.name.clone(), load(&set.path, &opts)?)];
            let bar = |m: &str, n: &str| progress::bar(Some(0), &format!("texts ({m} on {n})"));
            let (inference, batch) = (a.model.inference()?, a.batch.batch_size);
            let report = EvalReport::run(&finals, &sets, &inference, batch, bar)?;
            // the test scores as evaluate writes them, query by query: the report's per-query
            // wins and losses, and a development collection's validation of a rule (issue 55)
            let test_dir = a.out.join("test");
            std::fs::create_dir_all(&test_dir).map_err(|e| Error::file(&test_dir, e))?;
            report.save(&test_dir)?;
            let rows = report.rows();
            let seeds = SeedReport::new(&rows, &set.name, metric, Some(&base), &wall)?;
            let (stock_score, gains) = test_gains(&report.per_query_rows(metric), stock)?;
            Some((seeds, stock_score, gains))
        }
    };
    let r = ChoiceReport::new(dev, test, label_free, agreement);
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
            .inputs("--rule-from", &self.rule_from)
            .inputs("--state", &self.state);
        let io = self.models.iter().fold(io, |io, m| io.root("--models", m));
        let io = self.vectors.outputs(io);
        self.test.inputs(io).output("--out", &self.out)
    }
}
