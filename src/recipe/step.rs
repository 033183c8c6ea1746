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
                // a model named by its installed name is read from the data home
                let p = match p.exists() {
                    true => p,
                    false => crate::model::folders::home::installed_folder(c).unwrap_or(p),
                };
                if !own && p.exists() && !out.contains(&p) {
                    out.push(p);
                    break;
                }
            }
        }
        out
    }

    /// Arguments that look like a path (a '/' in them, or a data file's extension), alone or as
    /// NAME=PATH, that do not exist, are no installed model's name, and that neither this step nor
    /// a path in `written` (what earlier steps write) produces. A dry run names them: a recipe's
    /// paths are relative to the folder it runs from, and one run from elsewhere plans paths that
    /// are not there.
    pub fn missing_inputs(&self, written: &[PathBuf]) -> Vec<PathBuf> {
        const DATA: [&str; 7] = [
            ".parquet", ".arrow", ".csv", ".tsv", ".jsonl", ".txt", ".json",
        ];
        let mut out: Vec<PathBuf> = Vec::new();
        for a in self.args.iter().filter(|a| !a.starts_with("--")) {
            let c = a.split_once('=').map_or(a.as_str(), |(_, p)| p);
            let looks_like_path = c.contains('/') || DATA.iter().any(|e| c.ends_with(e));
            let p = PathBuf::from(c);
            let written_here = self
                .products()
                .iter()
                .chain(written)
                .any(|w| p.starts_with(w));
            if looks_like_path
                && !p.exists()
                && !written_here
                && crate::model::folders::home::installed_folder(c).is_none()
                && !out.contains(&p)
            {
                out.push(p);
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
