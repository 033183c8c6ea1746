use super::model_opts::ModelOpts;
use super::{out, progress, Named};
use clap::{Arg, ArgAction, ArgMatches};
use condenser::data::PairColumns;
use condenser::error::{Error, Result};
use condenser::eval::{EvalOptions, EvalReport, EvalResult, Model, ScoreFn, EVALUATORS};
use condenser::model::Loaded;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Model folders (sentence encoders, HF BERT or cross-encoders); each is evaluated on every dataset
    #[arg(long = "model", required = true)]
    models: Vec<PathBuf>,
    #[command(flatten)]
    sets: EvalSets,
    /// Pair columns: sentence1,sentence2,label
    #[arg(long, default_value = "sentence1,sentence2,label")]
    columns: PairColumns,
    /// Retrieval score
    #[arg(long, value_enum, default_value = "cosine")]
    score_fn: ScoreFn,
    /// Retrieval folders with a qrels/ directory: the qrels split to read (qrels/SPLIT.tsv)
    #[arg(long)]
    split: Option<String>,
    /// Retrieval: a document whose id equals the query's never counts as a hit (BEIR's option)
    #[arg(long)]
    ignore_identical_ids: bool,
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..))]
    batch_size: u64,
    /// Output folder for results.json and results.csv
    #[arg(long, default_value = "out/eval")]
    out: PathBuf,
    #[command(flatten)]
    model: ModelOpts,
}

/// The datasets to evaluate on: one `--<kind> NAME=PATH` flag per evaluator kind in the library's
/// registry (`condenser::eval::EVALUATORS`), in command-line order.
#[derive(Clone, Debug, Default)]
struct EvalSets(Vec<(usize, Named)>);

impl clap::FromArgMatches for EvalSets {
    fn from_arg_matches(m: &ArgMatches) -> std::result::Result<Self, clap::Error> {
        let mut sets = Vec::new();
        for (k, kind) in EVALUATORS.iter().enumerate() {
            if let (Some(vals), Some(at)) =
                (m.get_many::<Named>(kind.flag), m.indices_of(kind.flag))
            {
                sets.extend(vals.zip(at).map(|(v, i)| (i, k, v.clone())));
            }
        }
        sets.sort_by_key(|s| s.0);
        Ok(EvalSets(sets.into_iter().map(|(_, k, v)| (k, v)).collect()))
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> std::result::Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

impl clap::Args for EvalSets {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        EVALUATORS.iter().fold(cmd, |c, k| {
            c.arg(
                Arg::new(k.flag)
                    .long(k.flag)
                    .value_name("NAME=PATH")
                    .action(ArgAction::Append)
                    .value_parser(clap::value_parser!(Named))
                    .help(k.help),
            )
        })
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

pub fn run(a: Args) -> Result<()> {
    if a.sets.0.is_empty() {
        let flags: Vec<String> = EVALUATORS.iter().map(|k| format!("--{}", k.flag)).collect();
        return Err(Error::msg(format!(
            "nothing to evaluate: give datasets with {}",
            flags.join(", ")
        )));
    }
    let opts = EvalOptions {
        columns: a.columns.clone(),
        score_fn: a.score_fn,
        split: a.split.clone(),
        ignore_identical_ids: a.ignore_identical_ids,
    };
    let evaluators = a
        .sets
        .0
        .iter()
        .map(|(k, set)| Ok((set.name.clone(), (EVALUATORS[*k].load)(&set.path, &opts)?)))
        .collect::<Result<Vec<_>>>()?;
    let inference = a.model.inference()?;
    let mut report = EvalReport::default();
    for dir in &a.models {
        let loaded = Loaded::load(dir, &inference)?;
        let model = dir.display().to_string();
        for (name, ev) in &evaluators {
            let pb = progress::bar(Some(0), &format!("texts ({model} on {name})"));
            let e = ev.run(&Model::from(&loaded), a.batch_size as usize, &pb)?;
            pb.finish_and_clear();
            report.results.push(EvalResult {
                model: model.clone(),
                dataset: name.clone(),
                task: ev.task(),
                primary: e.primary,
                metrics: e.metrics,
            });
        }
    }
    report.save(&a.out)?;
    out(&format!(
        "{}\nwrote {}/results.{{json,csv}}\n{}\n",
        report.table(),
        a.out.display(),
        a.model.matmuls()
    ));
    Ok(())
}
