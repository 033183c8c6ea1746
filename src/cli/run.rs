use super::out;
use crate::data::write_atomic;
use crate::error::{Error, Result};
use crate::recipe::{Recipe, Step};
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct Args {
    /// Recipe file (TOML), e.g. recipes/augsbert-indomain.toml
    recipe: PathBuf,
    /// Override a recipe variable: NAME=VALUE (repeatable)
    #[arg(long = "set", value_name = "NAME=VALUE")]
    set: Vec<String>,
    /// Print the steps (and which would be skipped) without running them
    #[arg(long)]
    dry_run: bool,
    /// Run every step again, even finished ones
    #[arg(long)]
    force: bool,
}

/// Each step's status in `<out>/recipe_state.json`: "running" while it runs, "done" after.
struct State {
    path: PathBuf,
    steps: serde_json::Map<String, serde_json::Value>,
}

impl State {
    fn load(dir: &Path) -> Result<State> {
        let path = dir.join("recipe_state.json");
        let steps = match std::fs::read_to_string(&path) {
            Ok(t) => serde_json::from_str::<serde_json::Value>(&t)
                .map_err(|e| Error::file(&path, format!("invalid JSON: {e}")))?
                .get("steps")
                .and_then(|s| s.as_object().cloned())
                .unwrap_or_default(),
            Err(_) => Default::default(),
        };
        Ok(State { path, steps })
    }

    /// None: never run here; Some("changed"): ran with other arguments; else its status.
    fn get(&self, step: &Step) -> Option<&str> {
        let rec = self.steps.get(&step.name)?;
        if rec.get("args") != Some(&serde_json::json!(step.args)) {
            return Some("changed");
        }
        rec.get("status").and_then(|s| s.as_str())
    }

    fn set(&mut self, step: &Step, status: &str) -> Result<()> {
        self.steps.insert(
            step.name.clone(),
            serde_json::json!({"status": status, "args": step.args}),
        );
        if let Some(d) = self.path.parent() {
            std::fs::create_dir_all(d).map_err(|e| Error::file(d, e))?;
        }
        let text = serde_json::to_string_pretty(&serde_json::json!({"steps": self.steps})).unwrap();
        write_atomic(&self.path, text.as_bytes())
    }
}

pub fn run(a: Args) -> Result<()> {
    let overrides = a
        .set
        .iter()
        .map(|s| {
            s.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .ok_or_else(|| Error::msg(format!("--set '{s}': expected NAME=VALUE")))
        })
        .collect::<Result<Vec<_>>>()?;
    let recipe = Recipe::load(&a.recipe, &overrides)?;
    let mut state = State::load(&recipe.state_dir)?;
    let n = recipe.steps.len();
    for (i, step) in recipe.steps.iter().enumerate() {
        let status = state.get(step);
        let outputs_exist = !step.outputs.is_empty() && step.outputs.iter().all(|p| p.exists());
        // finished, or outputs made outside this recipe (never started here)
        if !a.force && outputs_exist && matches!(status, None | Some("done")) {
            out(&format!("[{}/{n}] {}: done, skipped\n", i + 1, step.name));
            continue;
        }
        let mut args = step.args.clone();
        let checkpoint = step.out.as_ref().map(|o| o.join("checkpoint/state.json"));
        // only training commands (train-*, pretrain) leave a checkpoint
        if status == Some("running") && checkpoint.is_some_and(|c| c.is_file()) {
            args.push("--resume".into());
        }
        out(&format!(
            "[{}/{n}] {}: condenser {} {}\n",
            i + 1,
            step.name,
            step.command,
            args.join(" ")
        ));
        let argv = std::iter::once("condenser".to_string())
            .chain(std::iter::once(step.command.clone()))
            .chain(args);
        let fail = |e: Error| {
            Error::msg(format!(
                "recipe {} step '{}' failed: {e}",
                recipe.path.display(),
                step.name
            ))
        };
        if a.dry_run {
            // the plan is checked as far as it can be without running: the step's flags parse
            super::parse_argv(argv).map_err(fail)?;
            continue;
        }
        state.set(step, "running")?;
        super::run_argv(argv).map_err(fail)?;
        if let Some(missing) = step.outputs.iter().find(|p| !p.exists()) {
            return Err(Error::msg(format!(
                "recipe {} step '{}' finished without writing {}",
                recipe.path.display(),
                step.name,
                missing.display()
            )));
        }
        state.set(step, "done")?;
    }
    Ok(())
}
