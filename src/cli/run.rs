use super::out;
use condenser::error::{Error, Result};
use condenser::recipe::{Decision, Recipe, State};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Recipe file (TOML), e.g. recipes/augsbert-indomain.toml
    recipe: PathBuf,
    /// Override a recipe variable: NAME=VALUE (repeatable)
    #[arg(long = "set", value_name = "NAME=VALUE", value_parser = parse_set)]
    set: Vec<(String, String)>,
    /// Print the steps (and which would be skipped) without running them
    #[arg(long)]
    dry_run: bool,
    /// Run every step again, even finished ones
    #[arg(long)]
    force: bool,
}

fn parse_set(s: &str) -> std::result::Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| format!("'{s}': expected NAME=VALUE"))
}

pub fn run(a: Args) -> Result<()> {
    let recipe = Recipe::load(&a.recipe, &a.set)?;
    let mut state = State::load(&recipe.state_dir)?;
    let n = recipe.steps.len();
    // what steps that run (or would run) write: every step reading it runs too
    let mut dirty: Vec<PathBuf> = Vec::new();
    for (i, step) in recipe.steps.iter().enumerate() {
        let fail = |e: Error| {
            Error::context(
                format!(
                    "recipe {} step '{}' failed",
                    recipe.path.display(),
                    step.name
                ),
                e,
            )
        };
        let resume = match state.decide(step, a.force, &dirty).map_err(fail)? {
            Decision::Skip(why) => {
                out(&format!("[{}/{n}] {}: {why}, skipped\n", i + 1, step.name));
                continue;
            }
            Decision::Run { resume, why } => {
                out(&format!(
                    "[{}/{n}] {}: runs ({why}): condenser {} {}{}\n",
                    i + 1,
                    step.name,
                    step.command,
                    step.args.join(" "),
                    if resume { " --resume" } else { "" },
                ));
                resume
            }
        };
        dirty.extend(step.products());
        let argv = ["condenser".to_string(), step.command.clone()]
            .into_iter()
            .chain(step.args.iter().cloned())
            .chain(resume.then(|| "--resume".to_string()));
        if a.dry_run {
            // the plan is checked as far as it can be without running: the step's flags parse
            super::parse_argv(argv).map_err(fail)?;
            continue;
        }
        state.start(step)?;
        super::run_argv(argv).map_err(fail)?;
        state.finish(step).map_err(fail)?;
    }
    Ok(())
}
