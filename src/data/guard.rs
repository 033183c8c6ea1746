//! The output guard every command that writes files passes before it reads anything: no output
//! may be an input, lie inside an input folder, or contain an input (paths compared after
//! resolving symbolic links, `.` and `..`, and relative to the working folder; two names of one
//! file, a hard link or a bind mount, compare equal too). A command's own output replacing its
//! input would destroy the user's data the moment the atomic rename lands, and exit 0.
//!
//! An existing model folder is a second kind of output: training and interpolation write only
//! into an empty or new folder, unless the user said `--resume` (continue its run) or
//! `--overwrite` (replace it).
use crate::error::{Error, Result};
use std::path::{Component, Path, PathBuf};

/// What a command reads and writes, each path with the flag that named it (for the message).
#[derive(Debug, Default)]
pub struct Io {
    inputs: Vec<(String, PathBuf)>,
    /// Folders searched for inputs by name (`choose --models`): an output may lie inside one
    /// (a report beside the models), not be or hold one.
    roots: Vec<(String, PathBuf)>,
    outputs: Vec<(String, PathBuf)>,
    models: Vec<ModelOut>,
}

/// An output model folder and how the user allowed an existing one to be written.
#[derive(Debug)]
struct ModelOut {
    flag: String,
    path: PathBuf,
    resume: bool,
    overwrite: bool,
}

impl Io {
    pub fn new() -> Io {
        Io::default()
    }

    /// A file or folder the command reads.
    pub fn input(mut self, flag: &str, path: &Path) -> Io {
        self.inputs.push((flag.to_string(), path.to_path_buf()));
        self
    }

    /// Inputs named by an optional or repeated flag.
    pub fn inputs<'p>(mut self, flag: &str, paths: impl IntoIterator<Item = &'p PathBuf>) -> Io {
        for p in paths {
            self = self.input(flag, p);
        }
        self
    }

    /// A folder the command looks into for inputs it names itself.
    pub fn root(mut self, flag: &str, path: &Path) -> Io {
        self.roots.push((flag.to_string(), path.to_path_buf()));
        self
    }

    /// A file or folder the command writes (or a folder it writes into).
    pub fn output(mut self, flag: &str, path: &Path) -> Io {
        self.outputs.push((flag.to_string(), path.to_path_buf()));
        self
    }

    /// A model folder the command writes: an output, and refused when it already holds files
    /// unless `resume` or `overwrite`.
    pub fn model_output(mut self, flag: &str, path: &Path, resume: bool, overwrite: bool) -> Io {
        self = self.output(flag, path);
        self.models.push(ModelOut {
            flag: flag.to_string(),
            path: path.to_path_buf(),
            resume,
            overwrite,
        });
        self
    }

    /// Refuse the first output that is, holds or lies inside an input, and an existing model
    /// folder written without `--resume` or `--overwrite`. Reads no file (only the folders'
    /// names and the links on the way).
    /// The outputs named so far, as (flag, path): what a command's summary says it wrote.
    pub fn outputs(&self) -> &[(String, PathBuf)] {
        &self.outputs
    }

    pub fn check(&self) -> Result<()> {
        let inputs: Vec<(&str, &Path, PathBuf, bool)> = self
            .inputs
            .iter()
            .map(|p| (p, false))
            .chain(self.roots.iter().map(|p| (p, true)))
            .map(|((f, p), root)| (f.as_str(), p.as_path(), resolve(p), root))
            .collect();
        for (oflag, out) in &self.outputs {
            let o = resolve(out);
            for (iflag, input, i, root) in &inputs {
                let how = if o == *i || same_file(out, input) {
                    "is the input"
                } else if o.starts_with(i) && !root {
                    "lies inside the input folder"
                } else if i.starts_with(&o) {
                    "contains the input"
                } else {
                    continue;
                };
                return Err(Error::msg(format!(
                    "refusing to write {oflag} {}: it {how} {iflag} {} (the output would replace \
                     what the command reads); write it elsewhere",
                    out.display(),
                    input.display()
                )));
            }
        }
        for m in &self.models {
            if m.resume || m.overwrite || !holds_files(&m.path) {
                continue;
            }
            return Err(Error::msg(format!(
                "{} {} already holds a model or a run's files: add --resume to continue its run \
                 from its checkpoint, or --overwrite to replace it (or write to a new folder)",
                m.flag,
                m.path.display()
            )));
        }
        Ok(())
    }
}

/// A folder with at least one entry.
fn holds_files(dir: &Path) -> bool {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => entries.next().is_some(),
        // a file where the folder should be: the write itself fails with its own message
        Err(_) => dir.exists(),
    }
}

/// Both exist and are one file (device and inode), whatever their names.
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

/// `p` absolute, its longest existing ancestor with every link resolved (canonicalize), the rest
/// appended with `.` dropped and `..` taken lexically (nothing there to be a link yet).
pub fn resolve(p: &Path) -> PathBuf {
    let abs = if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(p)
    };
    let mut base = abs.as_path();
    let mut rest: Vec<Component> = Vec::new();
    loop {
        if let Ok(c) = std::fs::canonicalize(base) {
            let mut out = c;
            for comp in rest.into_iter().rev() {
                match comp {
                    Component::CurDir => {}
                    Component::ParentDir => {
                        out.pop();
                    }
                    c => out.push(c.as_os_str()),
                }
            }
            return out;
        }
        match (base.parent(), base.components().next_back()) {
            (Some(parent), Some(last)) => {
                rest.push(last);
                base = parent;
            }
            _ => return abs,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_output_that_is_holds_or_lies_in_an_input_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("data");
        std::fs::create_dir(&d).unwrap();
        std::fs::write(d.join("corpus.parquet"), b"x").unwrap();
        let refused = |out: &Path| Io::new().input("--in", &d).output("--out", out).check();
        assert!(refused(&d)
            .unwrap_err()
            .to_string()
            .contains("is the input"));
        let inside = refused(&d.join("sub")).unwrap_err().to_string();
        assert!(inside.contains("inside the input folder"), "{inside}");
        assert!(refused(dir.path())
            .unwrap_err()
            .to_string()
            .contains("contains"));
        // a relative spelling with `..` through a folder not there yet, and a link to the input
        let odd = d.join("not-yet").join("..").join("..").join("data");
        assert!(refused(&odd).is_err());
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&d, &link).unwrap();
        assert!(refused(&link).is_err());
        let hard = dir.path().join("hard.parquet");
        std::fs::hard_link(d.join("corpus.parquet"), &hard).unwrap();
        let file = Io::new()
            .input("--input", &d.join("corpus.parquet"))
            .output("--out", &hard);
        assert!(file
            .check()
            .unwrap_err()
            .to_string()
            .contains("is the input"));
        // a sibling is fine
        assert!(refused(&dir.path().join("data2")).is_ok());
    }

    #[test]
    fn an_existing_model_folder_needs_resume_or_overwrite() {
        let dir = tempfile::tempdir().unwrap();
        let m = dir.path().join("model");
        let io = |resume, overwrite| Io::new().model_output("--out", &m, resume, overwrite);
        assert!(io(false, false).check().is_ok(), "a new folder");
        std::fs::create_dir(&m).unwrap();
        assert!(io(false, false).check().is_ok(), "an empty folder");
        std::fs::write(m.join("config.json"), b"{}").unwrap();
        let e = io(false, false).check().unwrap_err().to_string();
        assert!(e.contains("--resume") && e.contains("--overwrite"), "{e}");
        assert!(io(true, false).check().is_ok() && io(false, true).check().is_ok());
    }
}
