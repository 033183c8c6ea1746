use super::progress::out;
use super::run_recipe::RunOpts;
use crate::data::Io;
use crate::error::Result;
use crate::recipe::grid::{Grid, GridReport, Planning};
use crate::recipe::{Exec, Runner};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Grid file (TOML): preparation [[step]]s, a [grid] table and [[domain]] tables, e.g.
    /// recipes/transfer-grid.toml
    grid: PathBuf,
    #[command(flatten)]
    opts: RunOpts,
}

pub fn run(a: Args, exec: Exec) -> Result<()> {
    let grid = Grid::load(&a.grid, &a.opts.set)?;
    let mut runner = Runner::new(&grid.recipe, a.opts.dry_run, a.opts.force)?;
    runner.parse_all(&grid.recipe.steps, exec)?;
    runner.run(&grid.recipe.steps, "prepare ", &out, exec)?;
    // a dry run plans every step, taking the preparation's outputs as written
    let planning = if a.opts.dry_run {
        Planning::Plan
    } else {
        Planning::Run
    };
    let steps = grid.steps(planning)?;
    runner.run(&steps, "", &out, exec)?;
    if a.opts.dry_run {
        return Ok(());
    }
    let report = GridReport::build(&grid)?;
    let dir = grid.report_dir();
    report.save(&dir)?;
    out(&report.table());
    let beat: Vec<String> = report
        .beating_zero_shot()
        .iter()
        .map(|c| format!("{}>{}", c.source, c.target))
        .collect();
    out(&format!(
        "cells beating zero-shot with (i) or (ii): {}\nwrote {}/grid.{{json,csv}}, gain{{,_aug}}.{{svg,png}}, overlap_vs_gain{{,_aug}}.{{svg,png}}\n",
        if beat.is_empty() { "none".to_string() } else { beat.join(", ") },
        dir.display()
    ));
    Ok(())
}

impl Args {
    /// The grid file; each step passes the guard with its own flags when it runs.
    pub fn io(&self) -> Io {
        Io::new().input("GRID", &self.grid)
    }
}
