//! Running recipe steps in order: finished steps are skipped (the recipe state), an interrupted
//! training step resumes from its checkpoint, and a dry run checks each step's flags without
//! running it. The binary hands in how a step's argv is parsed and run.
use super::parse::Recipe;
use super::state::{Decision, State};
use super::step::Step;
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// How a step's argv (`condenser <command> <args>`) is executed.
pub type Exec<'e> = &'e dyn Fn(Vec<String>, StepMode) -> Result<()>;

/// How a step's argv is taken. `overwrite`: the step's model folder is the recipe's own (it ran
/// the step before, or --force), so a re-run may replace it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepMode {
    /// Its flags parsed, nothing else: every step, before the first one runs.
    Parse,
    /// Parsed and its outputs passed through the guard (a dry run).
    Check {
        overwrite: bool,
    },
    Run {
        overwrite: bool,
    },
}

pub struct Runner<'a> {
    file: &'a Path,
    state: State,
    dry_run: bool,
    force: bool,
    /// What steps that run (or would run) write: every step reading it runs too.
    dirty: Vec<PathBuf>,
    /// The recipe's out folder, where the runner keeps its state: never a missing input.
    state_dir: PathBuf,
}

impl<'a> Runner<'a> {
    pub fn new(recipe: &'a Recipe, dry_run: bool, force: bool) -> Result<Runner<'a>> {
        Ok(Runner {
            file: &recipe.path,
            state: State::load(&recipe.state_dir)?,
            dry_run,
            force,
            dirty: Vec::new(),
            state_dir: recipe.state_dir.clone(),
        })
    }

    /// Parse every step's flags before any runs: a misspelt flag in the last step is reported
    /// before the first one spends an hour.
    pub fn parse_all(&self, steps: &[Step], exec: Exec) -> Result<()> {
        for step in steps {
            exec(step.argv(false), StepMode::Parse).map_err(|e| {
                Error::context(
                    format!("recipe {} step '{}'", self.file.display(), step.name),
                    e,
                )
            })?;
        }
        Ok(())
    }

    /// Run `steps`; `tag` prefixes their numbers in the lines given to `log`.
    pub fn run(&mut self, steps: &[Step], tag: &str, log: &dyn Fn(&str), exec: Exec) -> Result<()> {
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
                .decide(step, self.force, &self.dirty)
                .map_err(fail)?;
            let (resume, why) = match decision {
                Decision::Skip(why) => {
                    log(&format!(
                        "[{tag}{}/{n}] {}: {why}, skipped\n",
                        i + 1,
                        step.name
                    ));
                    continue;
                }
                Decision::Run { resume, why } => (resume, why),
            };
            let overwrite = !resume && (self.force || self.state.knows(step));
            log(&format!(
                "[{tag}{}/{n}] {}: runs ({why}): condenser {} {}{}\n",
                i + 1,
                step.name,
                step.command,
                step.args.join(" "),
                match (
                    resume,
                    overwrite && step.products().iter().any(|p| p.exists())
                ) {
                    (true, _) => " --resume",
                    // the recipe's own earlier output: a model folder is replaced
                    (false, true) => " (its earlier outputs are replaced)",
                    _ => "",
                },
            ));
            self.dirty.extend(step.products());
            let argv = step.argv(resume);
            let mode = match self.dry_run {
                true => StepMode::Check { overwrite },
                false => StepMode::Run { overwrite },
            };
            if self.dry_run {
                // the plan is checked as far as it can be without running: the step's flags parse,
                // its outputs pass the guard, and what it reads exists or an earlier step writes it
                let written: Vec<PathBuf> = self
                    .dirty
                    .iter()
                    .chain(std::iter::once(&self.state_dir))
                    .cloned()
                    .collect();
                for p in step.missing_inputs(&written) {
                    log(&format!(
                        "  warning: {} does not exist here ({}) and no step writes it: a recipe's \
                         paths are relative to the folder it runs from\n",
                        p.display(),
                        std::env::current_dir().unwrap_or_default().display()
                    ));
                }
                exec(argv, mode).map_err(fail)?;
                continue;
            }
            self.state.start(step)?;
            exec(argv, mode).map_err(fail)?;
            self.state.finish(step).map_err(fail)?;
            // steps run in this process: the GPU's marks are per step only when read and reset
            if let Some((used, reserved)) = crate::runtime::gpu_memory_peak_mb() {
                log(&format!(
                    "[{tag}{}/{n}] {}: GPU memory {used:.0} MB in use at most, {reserved:.0} MB held by the pool\n",
                    i + 1,
                    step.name
                ));
                crate::runtime::gpu_memory_peak_reset();
            }
        }
        Ok(())
    }
}
