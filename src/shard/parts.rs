//! A row-mapping stage's output kept in parts while it runs, so that a killed run resumes where it
//! stopped instead of starting over (encoding a million documents on two cores takes hours).
//!
//! Beside the destination `X.parquet` the run keeps `X.parquet.partial/`: `state.json` (the stage,
//! its settings and where its rows start, written with the first part) and one
//! `part-<first>-<end>.parquet` a block (its input rows, or the stage's unit: mine's anchors), each
//! written atomically. A run that finds the folder with the same settings takes its parts as done
//! and starts at the first row after them; with other settings it stops, naming each difference,
//! and leaves the parts as they are (a recipe re-running its own step removes them:
//! `Stale::Replace`; a folder without a part holds nothing to keep and goes). At the end the
//! parts become the destination (one part is renamed, several are concatenated) and the folder
//! goes. Blocks are the stage's global blocks (`BLOCK`), so a resumed run batches every row as an
//! uninterrupted one does: the same bits.
use super::{merge::concat, settings_difference, Settings};
use crate::data::{self, write_atomic, ParquetSink};
use crate::error::{Error, Result};
use arrow_array::RecordBatch;
use serde::{Deserialize, Serialize};
use std::ops::Range;
use std::path::{Path, PathBuf};

/// What a run does with the parts an interrupted run left under other settings: stop, naming the
/// difference (a user's command), or remove them and start over (a recipe re-running its own step
/// after its arguments or inputs changed, which replaces that step's outputs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Stale {
    #[default]
    Refuse,
    Replace,
}

/// What a run's parts must share to be resumed, and what to do with parts that do not.
#[derive(Clone, Debug)]
pub struct Resume {
    pub settings: Settings,
    pub stale: Stale,
}

/// What `state.json` records: a run's parts belong to it only with all three the same.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct State {
    command: String,
    settings: Settings,
    /// The run's rows of the input (a whole run: from 0 to its end, unknown until read).
    start: usize,
}

/// The parts folder of a run writing `dest`.
pub struct Parts {
    dir: PathBuf,
    /// The row the next part starts at.
    next: usize,
    parts: Vec<PathBuf>,
    /// A new run's state, written with its first part: a run that fails before it finishes a
    /// block leaves nothing beside its output.
    unwritten: Option<State>,
}

impl Parts {
    /// `dest`'s parts folder for a run of `command` with `resume.settings` over `rows`: a new
    /// one, or the one a killed run with the same settings left (`resumed_at` says where it
    /// stopped).
    pub fn open(dest: &Path, command: &str, resume: &Resume, rows: &Range<usize>) -> Result<Parts> {
        let dir = folder(dest);
        let state = State {
            command: command.to_string(),
            settings: resume.settings.clone(),
            start: rows.start,
        };
        let state_file = dir.join("state.json");
        let found = part_files(&dir)?;
        // a run killed between its state and its first part left nothing to keep
        let replace = resume.stale == Stale::Replace || found.is_empty();
        if state_file.is_file() && replace {
            if let Some(why) = stale(&state_file, &state)? {
                crate::runtime::notes::note(&format!(
                    "note: removed {}: an interrupted run's parts with other settings ({why})",
                    dir.display()
                ));
                std::fs::remove_dir_all(&dir).map_err(|e| Error::file(&dir, e))?;
            }
        }
        if !state_file.is_file() {
            return Ok(Parts {
                dir,
                next: rows.start,
                parts: Vec::new(),
                unwritten: Some(state),
            });
        }
        if let Some(why) = stale(&state_file, &state)? {
            return Err(Error::file(
                &dir,
                format!(
                    "holds the rows of an interrupted run with other settings ({why}): run with its \
                     settings to resume it, or remove the folder to start over"
                ),
            ));
        }
        let mut next = rows.start;
        let mut parts = Vec::with_capacity(found.len());
        for (a, b, p) in found {
            if a != next || b <= a {
                return Err(Error::file(
                    &p,
                    format!(
                        "a part that does not continue the rows before it (expected from row \
                         {next}): remove the folder to start over"
                    ),
                ));
            }
            next = b;
            parts.push(p);
        }
        Ok(Parts {
            dir,
            next,
            parts,
            unwritten: None,
        })
    }

    /// The first row not yet done: where a resumed run starts (the range's start for a new one).
    pub fn resumed_at(&self) -> usize {
        self.next
    }

    /// Rows already done by an earlier run.
    pub fn done(&self, rows: &Range<usize>) -> usize {
        self.next - rows.start
    }

    /// A finished block of `units` input rows (or anchors), its output `batch`, kept as the next
    /// part.
    pub fn write(&mut self, batch: &RecordBatch, units: usize) -> Result<()> {
        let end = self.next + units;
        let p = self
            .dir
            .join(format!("part-{:012}-{:012}.parquet", self.next, end));
        let first = self.unwritten.take();
        let written = (|| {
            if let Some(state) = &first {
                std::fs::create_dir_all(&self.dir).map_err(|e| Error::file(&self.dir, e))?;
                let text = serde_json::to_string_pretty(state).expect("serializes");
                write_atomic(&self.dir.join("state.json"), text.as_bytes())?;
            }
            let mut sink = ParquetSink::create(&p, batch.schema())?;
            sink.write(batch)?;
            sink.finish()
        })();
        if written.is_err() && first.is_some() {
            // nothing to resume: the folder goes with the failed run (a full disk, a size limit)
            let _ = std::fs::remove_dir_all(&self.dir);
        }
        written?;
        self.parts.push(p);
        self.next = end;
        Ok(())
    }

    /// The parts made into `dest` and the folder removed; false where no block was written (no
    /// file is written then; blocks without output rows leave `dest` a table of none).
    pub fn finish(self, dest: &Path) -> Result<bool> {
        let mut full = Vec::new();
        for p in &self.parts {
            if data::count_rows(p)? > 0 {
                full.push(p.clone());
            }
        }
        let wrote = match (full.as_slice(), self.parts.first()) {
            (_, None) => false,
            ([], Some(one)) | ([one], _) => {
                std::fs::rename(one, dest).map_err(|e| Error::file(dest, e))?;
                true
            }
            (many, _) => {
                concat(many, dest)?;
                true
            }
        };
        if self.unwritten.is_none() {
            std::fs::remove_dir_all(&self.dir).map_err(|e| Error::file(&self.dir, e))?;
        }
        Ok(wrote)
    }
}

/// How the state in `state_file` differs from `state` (None: the same run).
fn stale(state_file: &Path, state: &State) -> Result<Option<String>> {
    let text = std::fs::read_to_string(state_file).map_err(|e| Error::file(state_file, e))?;
    let old: State = serde_json::from_str(&text)
        .map_err(|e| Error::file(state_file, format!("not a parts state: {e}")))?;
    Ok(if old == *state {
        None
    } else if old.command != state.command {
        Some(format!("command {} vs {}", old.command, state.command))
    } else if old.start != state.start {
        Some(format!("rows from {} vs {}", old.start, state.start))
    } else {
        Some(settings_difference(
            &old.settings,
            &state.settings,
            "that run",
            "this one",
        ))
    })
}

/// `dest`'s parts folder: `X.parquet` -> `X.parquet.partial`.
pub fn folder(dest: &Path) -> PathBuf {
    let mut name = dest.file_name().unwrap_or_default().to_os_string();
    name.push(".partial");
    dest.with_file_name(name)
}

/// The part files in `dir` (none where it is missing), in row order, with their rows.
fn part_files(dir: &Path) -> Result<Vec<(usize, usize, PathBuf)>> {
    let mut found = Vec::new();
    if dir.is_dir() {
        for e in std::fs::read_dir(dir).map_err(|e| Error::file(dir, e))? {
            let p = e.map_err(|e| Error::file(dir, e))?.path();
            if let Some((a, b)) = part_rows(&p) {
                found.push((a, b, p));
            }
        }
    }
    found.sort();
    Ok(found)
}

/// A part's rows from its name, `part-<first>-<end>.parquet` (None for anything else: a killed
/// write's temporary file).
fn part_rows(p: &Path) -> Option<(usize, usize)> {
    let name = p.file_name()?.to_str()?;
    let (a, b) = name
        .strip_prefix("part-")?
        .strip_suffix(".parquet")?
        .split_once('-')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}
