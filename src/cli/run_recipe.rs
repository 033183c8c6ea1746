use super::progress::out;
use crate::data::Io;
use crate::error::Result;
use crate::recipe::{Exec, Recipe, Runner};
use std::path::PathBuf;

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

/// Run the recipe, each step through `exec` (the binary's own dispatch).
pub fn run(a: Args, exec: Exec) -> Result<()> {
    let recipe = Recipe::load(&a.recipe, &a.opts.set)?;
    let mut runner = Runner::new(&recipe, a.opts.dry_run, a.opts.force)?;
    runner.parse_all(&recipe.steps, exec)?;
    runner.run(&recipe.steps, "", &out, exec)
}

impl Args {
    /// The recipe file; each step passes the guard with its own flags when it runs.
    pub fn io(&self) -> Io {
        Io::new().input("RECIPE", &self.recipe)
    }
}
