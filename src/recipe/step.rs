//! One recipe step: a subcommand with its arguments, the outputs that show it done, and the files
//! it reads (what a re-run compares to decide whether it runs again).
use std::path::PathBuf;

/// The state's file name in a recipe's out folder.
pub const STATE_FILE: &str = "recipe_state.json";

/// Flags whose folder is a cache, neither read as an input nor a product: its files are named by
/// everything they depend on, so what it holds never changes what a step computes (a step that
/// filled it must not make the next step that reads it look changed, nor an empty one missing).
const CACHE_FLAGS: [&str; 1] = ["--vector-cache"];

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
    /// The arguments that may name a path: not flags, nor a cache flag's folder.
    fn path_args(&self) -> impl Iterator<Item = &String> {
        let after = std::iter::once(None).chain(self.args.iter().map(Some));
        (self.args.iter().zip(after))
            .filter(|(a, prev)| {
                !a.starts_with("--") && !prev.is_some_and(|p| CACHE_FLAGS.contains(&p.as_str()))
            })
            .map(|(a, _)| a)
    }

    /// What a fingerprint of a folder it reads leaves out: its products, and the cache folders
    /// it names (`CACHE_FLAGS`).
    pub fn unfingerprinted(&self) -> Vec<PathBuf> {
        let caches = (self.args.windows(2))
            .filter(|w| CACHE_FLAGS.contains(&w[0].as_str()))
            .map(|w| PathBuf::from(&w[1]));
        self.products().into_iter().chain(caches).collect()
    }

    /// The files and folders the step reads: every argument that names an existing path (or
    /// NAME=PATH), except its own outputs and what lies under its --out.
    pub fn inputs(&self) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = Vec::new();
        for a in self.path_args() {
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
        for a in self.path_args() {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cache_folder_is_no_input_and_never_missing() {
        let d = tempfile::tempdir().unwrap();
        let (model, cache) = (d.path().join("m"), d.path().join("vectors"));
        std::fs::create_dir_all(&model).unwrap();
        let step = |cache: &std::path::Path| Step {
            name: "e".into(),
            command: "evaluate".into(),
            args: ["--model", model.to_str().unwrap()]
                .into_iter()
                .chain(["--vector-cache", cache.to_str().unwrap()])
                .map(String::from)
                .collect(),
            outputs: vec![],
            out: None,
        };
        // before the first run the folder does not exist: not a missing input
        assert_eq!(step(&cache).missing_inputs(&[]), Vec::<PathBuf>::new());
        std::fs::create_dir_all(&cache).unwrap();
        assert_eq!(step(&cache).inputs(), vec![model.clone()]);
        // the same folder after another flag is an input as before
        let mut other = step(&cache);
        other.args[2] = "--corpus-embeddings".into();
        assert_eq!(other.inputs(), vec![model, cache]);
    }
}
