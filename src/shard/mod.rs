//! Running a row-mapping stage on a slice of its input, on any scheduler: shard I of N takes a
//! deterministic row range, so any shard can be re-run alone, and `merge` reduces the shards to
//! exactly what one run writes.
//!
//! Rows are processed in global blocks of `BLOCK` rows counted from the start of the input, and a
//! shard is a run of whole blocks. Single runs batch the same way, so every model sees the same
//! batches (same padding, same length order) whether the input is sharded or not, and the merged
//! floats are bit for bit the single run's.
//!
//! Each shard writes its output under a name that carries I and N plus a manifest (JSON) naming
//! the command, its settings (flags and a fingerprint of the model), the input's row count and
//! the shard's rows; `merge` refuses shards whose manifests disagree.
mod merge;
pub mod parts;

pub use merge::{concat, shard_data, shards_of, MergeSummary};

use crate::data::write_atomic;
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::ops::Range;
use std::path::{Path, PathBuf};

/// Rows per block: the unit of batching that sharded and single runs share.
pub const BLOCK: usize = 1024;

/// Shard `index` (0-based) of `count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

impl std::str::FromStr for Shard {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Shard, String> {
        let bad = || format!("'{s}': expected I/N with 0 <= I < N, e.g. 0/4");
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let (index, count) = (
            i.trim().parse().map_err(|_| bad())?,
            n.trim().parse().map_err(|_| bad())?,
        );
        Shard::new(index, count).ok_or_else(bad)
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl Shard {
    pub fn new(index: usize, count: usize) -> Option<Shard> {
        (count > 0 && index < count).then_some(Shard { index, count })
    }

    /// The shard a command runs as: `--shard I/N` when given; else Slurm's array task
    /// (SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN of SLURM_ARRAY_TASK_COUNT); else a Kubernetes
    /// Indexed Job's JOB_COMPLETION_INDEX of `count` (`--shard-count`). None: the whole input.
    /// The second value says where the shard came from, for the command to print.
    pub fn resolve(
        explicit: Option<Shard>,
        count: Option<usize>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<(Shard, String)>> {
        if let Some(s) = explicit {
            return Ok(Some((s, "--shard".into())));
        }
        let num = |k: &str| -> Result<Option<usize>> {
            env(k)
                .map(|v| {
                    v.trim()
                        .parse::<usize>()
                        .map_err(|_| Error::msg(format!("{k}={v}: not a whole number")))
                })
                .transpose()
        };
        if let (Some(id), Some(n)) = (num("SLURM_ARRAY_TASK_ID")?, num("SLURM_ARRAY_TASK_COUNT")?) {
            let min = num("SLURM_ARRAY_TASK_MIN")?.unwrap_or(0);
            let s = id
                .checked_sub(min)
                .and_then(|i| Shard::new(i, n))
                .ok_or_else(|| {
                    Error::msg(format!(
                        "SLURM_ARRAY_TASK_ID={id} (min {min}) is no shard of SLURM_ARRAY_TASK_COUNT={n}: \
                         use a contiguous array such as --array=0-{}",
                        n.saturating_sub(1)
                    ))
                })?;
            return Ok(Some((
                s,
                "SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT".into(),
            )));
        }
        if let Some(i) = num("JOB_COMPLETION_INDEX")? {
            let n = count.ok_or_else(|| {
                Error::msg(
                    "JOB_COMPLETION_INDEX is set (a Kubernetes Indexed Job) but the shard count is not: \
                     pass --shard-count N (the Job's completions) or --shard I/N",
                )
            })?;
            let s = Shard::new(i, n).ok_or_else(|| {
                Error::msg(format!(
                    "JOB_COMPLETION_INDEX={i} is no shard of --shard-count {n}"
                ))
            })?;
            return Ok(Some((s, "JOB_COMPLETION_INDEX/--shard-count".into())));
        }
        if count.is_some() {
            return Err(Error::msg(
                "--shard-count without JOB_COMPLETION_INDEX: pass --shard I/N",
            ));
        }
        Ok(None)
    }

    /// This shard's rows of `rows`: whole blocks of `BLOCK`, dealt as evenly as they go.
    pub fn rows(&self, rows: usize) -> Range<usize> {
        self.rows_in(rows, BLOCK)
    }

    /// As `rows`, with blocks of `block` rows (a stage whose rows cost more uses smaller ones).
    pub fn rows_in(&self, rows: usize, block: usize) -> Range<usize> {
        let blocks = rows.div_ceil(block);
        let at = |i: usize| (blocks * i / self.count * block).min(rows);
        at(self.index)..at(self.index + 1)
    }

    /// "shard-00001-of-00004".
    pub fn tag(&self) -> String {
        format!("shard-{:05}-of-{:05}", self.index, self.count)
    }

    /// Where a shard writes what the whole run writes to the file `out`: `emb.parquet` ->
    /// `emb.shard-00001-of-00004.parquet`.
    pub fn file(&self, out: &Path) -> PathBuf {
        let stem = out.file_stem().unwrap_or_default().to_string_lossy();
        let name = match out.extension() {
            Some(e) => format!("{stem}.{}.{}", self.tag(), e.to_string_lossy()),
            None => format!("{stem}.{}", self.tag()),
        };
        out.with_file_name(name)
    }
}

/// What every shard of a run must share, by name: the job's settings and model fingerprints.
pub type Settings = serde_json::Map<String, serde_json::Value>;

/// The settings a shard's manifest records: `job`'s fields, serialised (a job leaves out what it
/// writes and which shard it is), plus a fingerprint of each model folder it reads, so shards made
/// with other flags or other weights never merge.
pub fn settings(job: &impl Serialize, models: &[(&str, Option<&Path>)]) -> Result<Settings> {
    let serde_json::Value::Object(mut map) =
        serde_json::to_value(job).map_err(|e| Error::msg(format!("shard settings: {e}")))?
    else {
        return Err(Error::msg("shard settings: a job serialises to a table"));
    };
    for (name, dir) in models {
        if let Some(dir) = dir {
            map.insert(
                format!("{name}_fingerprint"),
                model_fingerprint(dir)?.into(),
            );
        }
    }
    Ok(map)
}

/// What differs between two runs' settings, setting by setting (a nested table's by its dotted
/// path): `name=value (a) vs name=value (b)`, `a` and `b` saying whose each is.
pub fn settings_difference(x: &Settings, y: &Settings, a: &str, b: &str) -> String {
    type Leaves = std::collections::BTreeMap<String, serde_json::Value>;
    fn leaves(prefix: &str, m: &Settings, out: &mut Leaves) {
        for (k, v) in m {
            let key = if prefix.is_empty() {
                k.clone()
            } else {
                format!("{prefix}.{k}")
            };
            match v {
                serde_json::Value::Object(inner) => leaves(&key, inner, out),
                v => {
                    out.insert(key, v.clone());
                }
            }
        }
    }
    let (mut lx, mut ly) = (Leaves::new(), Leaves::new());
    leaves("", x, &mut lx);
    leaves("", y, &mut ly);
    let show = |k: &str, v: Option<&serde_json::Value>| match v {
        Some(serde_json::Value::String(s)) => format!("{k}={s}"),
        Some(v) => format!("{k}={v}"),
        None => format!("no {k}"),
    };
    let keys: std::collections::BTreeSet<&String> = lx.keys().chain(ly.keys()).collect();
    keys.into_iter()
        .filter(|k| lx.get(*k) != ly.get(*k))
        .map(|k| {
            format!(
                "{} ({a}) vs {} ({b})",
                show(k, lx.get(k)),
                show(k, ly.get(k))
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// A shard to run and the settings its manifest records.
#[derive(Clone, Debug)]
pub struct ShardRun {
    pub shard: Shard,
    pub settings: Settings,
}

impl ShardRun {
    /// The shard is done: its manifest goes beside `data` (`wrote`: whether the data file exists;
    /// a shard with no rows writes none).
    pub fn finish(
        &self,
        command: &str,
        data: &Path,
        total: usize,
        rows: Range<usize>,
        wrote: bool,
    ) -> Result<()> {
        let name = data
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        Manifest {
            command: command.to_string(),
            settings: self.settings.clone(),
            shard: self.shard,
            total,
            rows: [rows.start, rows.end],
            data: if wrote { name } else { String::new() },
        }
        .write(data)
    }
}

/// What a shard records beside its output.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// The subcommand (encode, augment, mine, domain-overlap).
    pub command: String,
    /// The settings every shard must share: the job's (without its shard and output) and model
    /// fingerprints.
    pub settings: Settings,
    pub shard: Shard,
    /// Rows (or pairs, anchors: the stage's unit) of the whole input, and this shard's range.
    pub total: usize,
    pub rows: [usize; 2],
    /// The shard's data file, relative to the manifest's folder.
    pub data: String,
}

impl Manifest {
    /// The manifest's path beside a shard's data file: `X.shard-…-of-….json`.
    pub fn path_for(data: &Path) -> PathBuf {
        data.with_extension("json")
    }

    /// Write the manifest of `data` (written before it, so a manifest means a finished shard).
    pub fn write(&self, data: &Path) -> Result<()> {
        let text = serde_json::to_string_pretty(self).expect("serializes");
        write_atomic(&Manifest::path_for(data), text.as_bytes())
    }

    pub fn read(path: &Path) -> Result<Manifest> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::file(path, e))?;
        serde_json::from_str(&text)
            .map_err(|e| Error::file(path, format!("not a shard manifest: {e}")))
    }
}

/// A fingerprint of a model folder's weights and config (xxh3 of their bytes), so shards made
/// with different models never merge.
pub fn model_fingerprint(dir: &Path) -> Result<String> {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    let mut seen = 0;
    for name in ["config.json", "model.safetensors", "tokenizer.json"] {
        let p = dir.join(name);
        if p.is_file() {
            let bytes = std::fs::read(&p).map_err(|e| Error::file(&p, e))?;
            h.update(name.as_bytes());
            h.update(&bytes);
            seen += 1;
        }
    }
    if dir.is_file() {
        let bytes = std::fs::read(dir).map_err(|e| Error::file(dir, e))?;
        h.update(&bytes);
        seen += 1;
    }
    if seen == 0 {
        return Err(Error::file(
            dir,
            "no config.json, model.safetensors or tokenizer.json to fingerprint",
        ));
    }
    Ok(format!("{:016x}", h.digest()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_cover_the_rows_in_whole_blocks() {
        for rows in [0, 1, 1023, 1024, 1025, 5749, 10 * BLOCK] {
            for n in 1..=6 {
                let ranges: Vec<_> = (0..n)
                    .map(|i| Shard::new(i, n).unwrap().rows(rows))
                    .collect();
                assert_eq!(ranges[0].start, 0);
                assert_eq!(ranges[n - 1].end, rows);
                for w in ranges.windows(2) {
                    assert_eq!(w[0].end, w[1].start);
                    assert!(w[0].end % BLOCK == 0 || w[0].end == rows);
                }
            }
        }
    }

    #[test]
    fn shard_from_flags_and_schedulers() {
        let none = |_: &str| None;
        assert_eq!(Shard::resolve(None, None, none).unwrap(), None);
        let slurm = |k: &str| match k {
            "SLURM_ARRAY_TASK_ID" => Some("3".to_string()),
            "SLURM_ARRAY_TASK_COUNT" => Some("4".to_string()),
            "SLURM_ARRAY_TASK_MIN" => Some("1".to_string()),
            _ => None,
        };
        assert_eq!(
            Shard::resolve(None, None, slurm).unwrap().unwrap().0,
            Shard::new(2, 4).unwrap()
        );
        let flag = Shard::new(1, 2);
        assert_eq!(
            Shard::resolve(flag, None, slurm).unwrap().unwrap().0,
            flag.unwrap()
        );
        let k8s = |k: &str| (k == "JOB_COMPLETION_INDEX").then(|| "2".to_string());
        assert_eq!(
            Shard::resolve(None, Some(3), k8s).unwrap().unwrap().0,
            Shard::new(2, 3).unwrap()
        );
        assert!(Shard::resolve(None, None, k8s).is_err());
        assert!(Shard::resolve(None, Some(2), k8s).is_err());
        assert!("4/4".parse::<Shard>().is_err() && "1/0".parse::<Shard>().is_err());
        assert_eq!(
            Shard::new(1, 4).unwrap().file(Path::new("o/emb.parquet")),
            Path::new("o/emb.shard-00001-of-00004.parquet")
        );
    }
}
