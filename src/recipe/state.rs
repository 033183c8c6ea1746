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
            // only training commands (train-*, pretrain) leave a checkpoint; one that finished
            // has removed it and left its model card and log, and --resume then says it is done
            let resumable = step.out.as_ref().is_some_and(|o| {
                o.join("checkpoint/state.json").is_file()
                    || crate::model::folders::card::finished_run(o)
            });
            return Ok(Decision::Run {
                resume: resumable && rec.args == step.args,
                why: "it was interrupted".into(),
            });
        }
        if rec.args != step.args {
            return Ok(run("its arguments changed"));
        }
        let skip = step.unfingerprinted();
        let now = fingerprints(&inputs, &skip)?;
        for (p, f) in &now {
            let holds = match rec.inputs.get(p) {
                Some(old) => still_holds(Path::new(p), old, f, &skip)?,
                None => false,
            };
            if !holds {
                return Ok(run(&format!("its input {p} changed")));
            }
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
    /// The recipe ran (or started) this step before: its outputs are the recipe's own.
    pub fn knows(&self, step: &Step) -> bool {
        self.steps.contains_key(&step.name)
    }

    pub fn start(&mut self, step: &Step) -> Result<()> {
        let inputs = fingerprints(&step.inputs(), &step.unfingerprinted())?;
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

    /// The wall times of the state at `p` (a recipe_state.json or the folder holding it); none
    /// without one.
    pub fn wall_times_at(p: Option<&Path>) -> Result<Vec<(PathBuf, f64)>> {
        Ok(match p {
            Some(p) if p.is_file() => {
                State::load(p.parent().unwrap_or(Path::new(".")))?.wall_times()
            }
            Some(dir) => State::load(dir)?.wall_times(),
            None => Vec::new(),
        })
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

/// Path -> fingerprint of its content: for a file its size and the xxh3 of its bytes; for a
/// folder a hash of every file under it (relative path, size, content hash) but the step's own
/// products (`skip`: a step that reads a folder and writes inside it, as `choose` reads the models
/// in a recipe's out folder). By content, not modification time: a data folder copied again (a
/// restored backup, a re-synced share) is no change, and re-running every step after it would
/// throw away finished work.
fn fingerprints(paths: &[PathBuf], skip: &[PathBuf]) -> Result<BTreeMap<String, String>> {
    paths
        .iter()
        .map(|p| {
            Ok((
                p.display().to_string(),
                fingerprint(p, skip, Kind::Content)?,
            ))
        })
        .collect()
}

/// Whether `old`, recorded for `p`, still holds: a fingerprint of today's kind is compared as it
/// is; one written before fingerprints were by content ("size:mtime") is compared with `p`'s
/// size and modification time, so that a state from an earlier version skips what it finished.
fn still_holds(p: &Path, old: &str, now: &str, skip: &[PathBuf]) -> Result<bool> {
    if old.starts_with(FILE_TAG) || old.starts_with(DIR_TAG) {
        return Ok(old == now);
    }
    Ok(fingerprint(p, skip, Kind::Legacy)? == old)
}

const FILE_TAG: &str = "xxh3:";
const DIR_TAG: &str = "dir-xxh3:";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Content,
    /// size and modification time, as states recorded them before
    Legacy,
}

fn fingerprint(p: &Path, skip: &[PathBuf], kind: Kind) -> Result<String> {
    let m = std::fs::metadata(p).map_err(|e| Error::file(p, e))?;
    if !m.is_dir() {
        return Ok(match kind {
            Kind::Content => format!("{FILE_TAG}{}:{:016x}", m.len(), content_hash(p, &m)?),
            Kind::Legacy => format!("{}:{}", m.len(), mtime(&m)),
        });
    }
    let mut files = Vec::new();
    walk(p, p, 0, skip, kind, &mut files)?;
    files.sort();
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    for f in &files {
        h.update(f.as_bytes());
        h.update(b"\n");
    }
    let tag = if kind == Kind::Content {
        DIR_TAG
    } else {
        "dir:"
    };
    Ok(format!("{tag}{}:{:016x}", files.len(), h.digest()))
}

/// "relative path size (content hash | mtime)" of every file under `dir` (links followed, 16
/// levels deep at most).
fn walk(
    root: &Path,
    dir: &Path,
    depth: usize,
    skip: &[PathBuf],
    kind: Kind,
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
            walk(root, &p, depth + 1, skip, kind, out)?;
        } else if p.file_name().is_some_and(|n| n == STATE_FILE) {
            // a recipe's own bookkeeping inside a folder input, rewritten by every step
        } else {
            let rel = p.strip_prefix(root).unwrap_or(&p).display().to_string();
            out.push(match kind {
                Kind::Content => format!("{rel} {} {:016x}", m.len(), content_hash(&p, &m)?),
                Kind::Legacy => format!("{rel} {} {}", m.len(), mtime(&m)),
            });
        }
    }
    Ok(())
}

/// xxh3 of a file's bytes, each file read once a process: a run decides on every step, and many
/// read the same model folder. The memo is keyed by (path, size, mtime, inode, ctime), and a file
/// modified in the last few seconds is never memoised (git's "racy clean" rule): a same-size
/// rewrite within the file system's time granularity (a second, or two on FAT) would otherwise
/// keep its old hash and a step would be skipped on changed input.
fn content_hash(p: &Path, m: &std::fs::Metadata) -> Result<u64> {
    use std::os::unix::fs::MetadataExt;
    type Key = (PathBuf, u64, u128, u64, i64, i64);
    type Seen = std::sync::Mutex<BTreeMap<Key, u64>>;
    static SEEN: std::sync::OnceLock<Seen> = std::sync::OnceLock::new();
    let key = (
        p.to_path_buf(),
        m.len(),
        mtime(m),
        m.ino(),
        m.ctime(),
        m.ctime_nsec(),
    );
    let seen = SEEN.get_or_init(Default::default);
    if let Some(&h) = seen.lock().expect("not poisoned").get(&key) {
        return Ok(h);
    }
    let h = crate::data::file_xxh3(p)?;
    let settled = m
        .modified()
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age > RACY);
    if settled {
        seen.lock().expect("not poisoned").insert(key, h);
    }
    Ok(h)
}

/// How recently modified a file must not be for its hash to be memoised: past the coarsest
/// modification-time granularity in use (FAT's two seconds).
const RACY: std::time::Duration = std::time::Duration::from_secs(3);

fn mtime(m: &std::fs::Metadata) -> u128 {
    m.modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos())
}

#[cfg(test)]
#[path = "state_test.rs"]
mod tests;
