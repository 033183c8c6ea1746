//! A recipe run's state in `<out>/recipe_state.json`: per step its status ("running" while it
//! runs, "done" after), the arguments it ran with and a fingerprint of every file it read. A step
//! is skipped only when it finished with the same arguments on unchanged inputs (an upstream step
//! that ran again changes its outputs, so everything downstream runs again, and nothing else).
use super::step::{Step, STATE_FILE};
use crate::data::write_atomic;
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Status {
    Running,
    Done,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Record {
    status: Status,
    args: Vec<String>,
    /// Input path -> fingerprint, as they were when the step started.
    #[serde(default)]
    inputs: BTreeMap<String, String>,
    /// The step's --out, and its wall time once done (for reports: `condenser report --state`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    out: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    seconds: Option<f64>,
}

/// What to do with a step, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    Skip(String),
    /// Run it; `resume`: continue its training checkpoint.
    Run {
        resume: bool,
        why: String,
    },
}

pub struct State {
    path: PathBuf,
    steps: BTreeMap<String, Record>,
    /// When the running step started.
    started: Option<std::time::Instant>,
}

impl State {
    pub fn load(dir: &Path) -> Result<State> {
        let path = dir.join(STATE_FILE);
        let steps = match std::fs::read_to_string(&path) {
            Ok(t) => {
                #[derive(Deserialize)]
                struct File {
                    steps: BTreeMap<String, Record>,
                }
                serde_json::from_str::<File>(&t)
                    .map_err(|e| Error::file(&path, format!("not a recipe state: {e}")))?
                    .steps
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => return Err(Error::file(&path, e)),
        };
        Ok(State {
            path,
            steps,
            started: None,
        })
    }

    /// Decide on `step`. `dirty`: what steps that run (or would run) before it write; a step
    /// reading any of it runs too.
    pub fn decide(&self, step: &Step, force: bool, dirty: &[PathBuf]) -> Result<Decision> {
        let run = |why: &str| Decision::Run {
            resume: false,
            why: why.to_string(),
        };
        if force {
            return Ok(run("--force"));
        }
        let outputs_exist = !step.outputs.is_empty() && step.outputs.iter().all(|p| p.exists());
        let inputs = step.inputs();
        if let Some(up) = inputs
            .iter()
            .find(|i| dirty.iter().any(|d| i.starts_with(d)))
        {
            return Ok(run(&format!(
                "its input {} is made by a step that runs before it",
                up.display()
            )));
        }
        let Some(rec) = self.steps.get(&step.name) else {
            return Ok(if outputs_exist {
                Decision::Skip("outputs exist (made outside this recipe)".into())
            } else {
                run("not run yet")
            });
        };
        if rec.status == Status::Running {
            let ckpt = step.out.as_ref().map(|o| o.join("checkpoint/state.json"));
            return Ok(Decision::Run {
                // only training commands (train-*, pretrain) leave a checkpoint
                resume: ckpt.is_some_and(|c| c.is_file()) && rec.args == step.args,
                why: "it was interrupted".into(),
            });
        }
        if rec.args != step.args {
            return Ok(run("its arguments changed"));
        }
        let now = fingerprints(&inputs, &step.products())?;
        if let Some((p, _)) = now.iter().find(|(p, f)| rec.inputs.get(*p) != Some(f)) {
            return Ok(run(&format!("its input {p} changed")));
        }
        if let Some(p) = rec.inputs.keys().find(|p| !now.contains_key(*p)) {
            return Ok(run(&format!("its input {p} is gone")));
        }
        if !outputs_exist {
            return Ok(run("its outputs are missing"));
        }
        Ok(Decision::Skip("done".into()))
    }

    /// The step starts: its arguments and the fingerprints of its inputs are recorded.
    pub fn start(&mut self, step: &Step) -> Result<()> {
        let inputs = fingerprints(&step.inputs(), &step.products())?;
        self.steps.insert(
            step.name.clone(),
            Record {
                status: Status::Running,
                args: step.args.clone(),
                inputs,
                out: step.out.clone(),
                seconds: None,
            },
        );
        self.started = Some(std::time::Instant::now());
        self.save()
    }

    /// The step finished: every output must exist.
    pub fn finish(&mut self, step: &Step) -> Result<()> {
        if let Some(missing) = step.outputs.iter().find(|p| !p.exists()) {
            return Err(Error::msg(format!(
                "step '{}' finished without writing {}",
                step.name,
                missing.display()
            )));
        }
        if let Some(r) = self.steps.get_mut(&step.name) {
            r.status = Status::Done;
            r.seconds = self.started.take().map(|t| t.elapsed().as_secs_f64());
        }
        self.save()
    }

    /// Each finished step's --out and wall time in seconds.
    pub fn wall_times(&self) -> Vec<(PathBuf, f64)> {
        self.steps
            .values()
            .filter_map(|r| Some((r.out.clone()?, r.seconds?)))
            .collect()
    }

    fn save(&self) -> Result<()> {
        let text = serde_json::to_string_pretty(&serde_json::json!({ "steps": self.steps }))
            .expect("serializes");
        write_atomic(&self.path, text.as_bytes())
    }
}

/// Path -> "size:mtime" for a file; for a folder, a hash of every file under it (relative path,
/// size, modification time) but the step's own products (`skip`: a step that reads a folder and
/// writes inside it, as `choose` reads the models in a recipe's out folder).
fn fingerprints(paths: &[PathBuf], skip: &[PathBuf]) -> Result<BTreeMap<String, String>> {
    paths
        .iter()
        .map(|p| Ok((p.display().to_string(), fingerprint(p, skip)?)))
        .collect()
}

fn fingerprint(p: &Path, skip: &[PathBuf]) -> Result<String> {
    let m = std::fs::metadata(p).map_err(|e| Error::file(p, e))?;
    if !m.is_dir() {
        return Ok(format!("{}:{}", m.len(), mtime(&m)));
    }
    let mut files = Vec::new();
    walk(p, p, 0, skip, &mut files)?;
    files.sort();
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    for f in &files {
        h.update(f.as_bytes());
        h.update(b"\n");
    }
    Ok(format!("dir:{}:{:016x}", files.len(), h.digest()))
}

/// "relative path size mtime" of every file under `dir` (links followed, 16 levels deep at most).
fn walk(
    root: &Path,
    dir: &Path,
    depth: usize,
    skip: &[PathBuf],
    out: &mut Vec<String>,
) -> Result<()> {
    if depth > 16 {
        return Ok(());
    }
    for e in std::fs::read_dir(dir).map_err(|e| Error::file(dir, e))? {
        let e = e.map_err(|e| Error::file(dir, e))?;
        let p = e.path();
        if skip.contains(&p) {
            continue;
        }
        let Ok(m) = std::fs::metadata(&p) else {
            continue; // a dangling link
        };
        if m.is_dir() {
            walk(root, &p, depth + 1, skip, out)?;
        } else if p.file_name().is_some_and(|n| n == STATE_FILE) {
            // a recipe's own bookkeeping inside a folder input, rewritten by every step
        } else {
            let rel = p.strip_prefix(root).unwrap_or(&p).display().to_string();
            out.push(format!("{rel} {} {}", m.len(), mtime(&m)));
        }
    }
    Ok(())
}

fn mtime(m: &std::fs::Metadata) -> u128 {
    m.modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos())
}
