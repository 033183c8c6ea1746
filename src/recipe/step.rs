//! One recipe step: a subcommand with its arguments, the outputs that show it done, and the files
//! it reads (what a re-run compares to decide whether it runs again).
use std::path::PathBuf;

/// The state's file name in a recipe's out folder.
pub const STATE_FILE: &str = "recipe_state.json";

#[derive(Clone, Debug)]
pub struct Step {
    pub name: String,
    pub command: String,
    /// The subcommand's arguments, variables substituted (without the subcommand itself).
    pub args: Vec<String>,
    pub outputs: Vec<PathBuf>,
    /// The step's --out, where a training command keeps its checkpoint.
    pub out: Option<PathBuf>,
}

impl Step {
    /// The files and folders the step reads: every argument that names an existing path (or
    /// NAME=PATH), except its own outputs and what lies under its --out.
    pub fn inputs(&self) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = Vec::new();
        for a in self.args.iter().filter(|a| !a.starts_with("--")) {
            let candidates = [Some(a.as_str()), a.split_once('=').map(|(_, p)| p)];
            for c in candidates.into_iter().flatten() {
                let p = PathBuf::from(c);
                // the runner's own state file changes with every step: never an input
                let own = self.outputs.contains(&p)
                    || self.out.as_ref().is_some_and(|o| p.starts_with(o))
                    || p.file_name().is_some_and(|n| n == STATE_FILE);
                if !own && p.exists() && !out.contains(&p) {
                    out.push(p);
                    break;
                }
            }
        }
        out
    }

    /// The step's argv as the binary parses it (`condenser <command> <args>`), `--resume` added
    /// when it continues its checkpoint.
    pub fn argv(&self, resume: bool) -> Vec<String> {
        ["condenser".to_string(), self.command.clone()]
            .into_iter()
            .chain(self.args.iter().cloned())
            .chain(resume.then(|| "--resume".to_string()))
            .collect()
    }

    /// What the step writes: its --out and its outputs.
    pub fn products(&self) -> Vec<PathBuf> {
        self.out.iter().chain(&self.outputs).cloned().collect()
    }
}
