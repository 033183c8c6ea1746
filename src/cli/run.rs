use super::out;
use condenser::error::{Error, Result};
use condenser::recipe::{Decision, Recipe, State, Step};
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct Args {
    /// Recipe file (TOML), e.g. recipes/augsbert-indomain.toml
    recipe: PathBuf,
    #[command(flatten)]
    opts: RunOpts,
}

/// How a recipe (or a grid) runs.
#[derive(clap::Args)]
pub struct RunOpts {
    /// Override a recipe variable: NAME=VALUE (repeatable)
    #[arg(long = "set", value_name = "NAME=VALUE", value_parser = parse_set)]
    pub set: Vec<(String, String)>,
    /// Print the steps (and which would be skipped) without running them
    #[arg(long)]
    pub dry_run: bool,
    /// Run every step again, even finished ones
    #[arg(long)]
    pub force: bool,
}

fn parse_set(s: &str) -> std::result::Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| format!("'{s}': expected NAME=VALUE"))
}

pub fn run(a: Args) -> Result<()> {
    let recipe = Recipe::load(&a.recipe, &a.opts.set)?;
    let mut runner = Runner::new(&recipe, &a.opts)?;
    runner.run(&recipe.steps, "")
}

/// Runs steps in order, skipping finished ones (the recipe state), resuming interrupted training.
pub struct Runner<'a> {
    file: &'a Path,
    state: State,
    opts: &'a RunOpts,
    /// What steps that run (or would run) write: every step reading it runs too.
    dirty: Vec<PathBuf>,
}

impl<'a> Runner<'a> {
    pub fn new(recipe: &'a Recipe, opts: &'a RunOpts) -> Result<Runner<'a>> {
        Ok(Runner {
            file: &recipe.path,
            state: State::load(&recipe.state_dir)?,
            opts,
            dirty: Vec::new(),
        })
    }

    /// Run `steps`; `tag` prefixes their numbers in the log.
    pub fn run(&mut self, steps: &[Step], tag: &str) -> Result<()> {
        let n = steps.len();
        for (i, step) in steps.iter().enumerate() {
            let fail = |e: Error| {
                Error::context(
                    format!("recipe {} step '{}' failed", self.file.display(), step.name),
                    e,
                )
            };
            let decision = self
                .state
                .decide(step, self.opts.force, &self.dirty)
                .map_err(fail)?;
            let resume = match decision {
                Decision::Skip(why) => {
                    out(&format!(
                        "[{tag}{}/{n}] {}: {why}, skipped\n",
                        i + 1,
                        step.name
                    ));
                    continue;
                }
                Decision::Run { resume, why } => {
                    out(&format!(
                        "[{tag}{}/{n}] {}: runs ({why}): condenser {} {}{}\n",
                        i + 1,
                        step.name,
                        step.command,
                        step.args.join(" "),
                        if resume { " --resume" } else { "" },
                    ));
                    resume
                }
            };
            self.dirty.extend(step.products());
            let argv = ["condenser".to_string(), step.command.clone()]
                .into_iter()
                .chain(step.args.iter().cloned())
                .chain(resume.then(|| "--resume".to_string()));
            if self.opts.dry_run {
                // the plan is checked as far as it can be without running: the step's flags parse
                super::parse_argv(argv).map_err(fail)?;
                continue;
            }
            self.state.start(step)?;
            super::run_argv(argv).map_err(fail)?;
            self.state.finish(step).map_err(fail)?;
        }
        Ok(())
    }
}
