//! `merge`: the shards of one run, checked to belong together, and their Parquet data
//! concatenated in shard order into exactly what the run writes unsharded (encode, augment, mine,
//! search). A stage whose shards reduce otherwise (domain-overlap's parts) reduces them itself;
//! the `merge` command picks the reduction by the manifests' command.
use super::Manifest;
use crate::data::{self, ParquetSink};
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

#[derive(Clone, Debug)]
pub struct MergeSummary {
    pub command: String,
    pub shards: usize,
    /// Rows (the stage's unit) of the merged result.
    pub total: usize,
}

/// The shards of the run whose whole output would be `out` (a file, or domain-overlap's folder),
/// checked to belong together: what made them, and their data files in shard order.
pub fn shards_of(out: &Path) -> Result<(MergeSummary, Vec<PathBuf>)> {
    let shards = find(out)?;
    let first = &shards[0].1;
    let summary = MergeSummary {
        command: first.command.clone(),
        shards: shards.len(),
        total: first.total,
    };
    Ok((summary, shard_data(out)?))
}

/// Parquet shards (`shards_of`'s data) concatenated in order into `out`, the schema's metadata
/// kept.
pub fn concat(data: &[PathBuf], out: &Path) -> Result<()> {
    let mut sink: Option<ParquetSink> = None;
    for p in data {
        if data::count_rows(p)? == 0 {
            continue; // a shard whose range held no rows
        }
        let names = data::column_names(p)?;
        let cols: Vec<&str> = names.iter().map(String::as_str).collect();
        // the schema's metadata (how encode made its vectors) travels into the merged file
        let meta = data::schema_metadata(p)?;
        for b in data::open(p, &cols)? {
            let b = b?;
            let schema =
                std::sync::Arc::new(b.data.schema().as_ref().clone().with_metadata(meta.clone()));
            let batch =
                arrow_array::RecordBatch::try_new(schema.clone(), b.data.columns().to_vec())
                    .map_err(|e| Error::file(p, e))?;
            if sink.is_none() {
                sink = Some(ParquetSink::create(out, schema)?);
            }
            sink.as_mut().expect("created").write(&batch)?;
        }
    }
    sink.ok_or_else(|| Error::file(out, "every shard is empty: nothing to merge"))?
        .finish()
}

/// The data files of `out`'s shards in shard order (shards without rows left out), after the
/// checks `merge` makes: a sharded run's output read without merging it.
pub fn shard_data(out: &Path) -> Result<Vec<PathBuf>> {
    let data: Vec<PathBuf> = find(out)?
        .iter()
        .filter(|(_, m)| !m.data.is_empty())
        .map(|(p, m)| p.with_file_name(&m.data))
        .collect();
    if let Some(missing) = data.iter().find(|p| !p.is_file()) {
        return Err(Error::file(
            missing,
            "the shard's manifest names this file, which is missing",
        ));
    }
    Ok(data)
}

/// The manifests of `out`'s shards in shard order, after checking that they are all there, were
/// made by the same command with the same settings and N, and cover the input once.
fn find(out: &Path) -> Result<Vec<(PathBuf, Manifest)>> {
    let folder = out.is_dir() || out.extension().is_none();
    let (dir, prefix) = if folder {
        (out.to_path_buf(), "overlap.shard-".to_string())
    } else {
        let stem = out.file_stem().unwrap_or_default().to_string_lossy();
        let dir = match out.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        (dir, format!("{stem}.shard-"))
    };
    let mut found = Vec::new();
    if dir.is_dir() {
        for e in std::fs::read_dir(&dir).map_err(|e| Error::file(&dir, e))? {
            let p = e.map_err(|e| Error::file(&dir, e))?.path();
            let name = p
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            if name.starts_with(&prefix) && name.ends_with(".json") {
                found.push((p.clone(), Manifest::read(&p)?));
            }
        }
    }
    if found.is_empty() {
        return Err(Error::file(
            out,
            format!(
                "no shards found: expected manifests {}/{prefix}NNNNN-of-NNNNN.json (written by a run with --shard I/N)",
                dir.display()
            ),
        ));
    }
    found.sort_by_key(|(_, m)| m.shard.index);
    let (p0, m0) = found[0].clone();
    for (p, m) in &found {
        if m.shard.count != m0.shard.count {
            return Err(Error::file(
                p,
                format!(
                    "shard {} was made for N = {}, {} for N = {}: remove the stale shards",
                    m.shard,
                    m.shard.count,
                    p0.display(),
                    m0.shard.count
                ),
            ));
        }
        if m.command != m0.command || m.settings != m0.settings || m.total != m0.total {
            return Err(Error::file(
                p,
                format!(
                    "shard {} was made with other settings than {}: {}",
                    m.shard,
                    p0.display(),
                    difference(&m0, m)
                ),
            ));
        }
    }
    let n = m0.shard.count;
    for i in 0..n {
        if found.get(i).is_none_or(|(_, m)| m.shard.index != i) {
            let want = super::Shard { index: i, count: n };
            return Err(Error::msg(format!(
                "shard {want} of {} is missing: no {}/{prefix}{}.json",
                out.display(),
                dir.display(),
                &want.tag()["shard-".len()..]
            )));
        }
    }
    let mut at = 0;
    for (p, m) in &found {
        if m.rows[0] != at || m.rows[1] < m.rows[0] {
            return Err(Error::file(
                p,
                format!(
                    "shard {} covers rows {:?}, expected from row {at}",
                    m.shard, m.rows
                ),
            ));
        }
        at = m.rows[1];
    }
    if at != m0.total {
        return Err(Error::msg(format!(
            "the shards of {} cover {at} of {} rows",
            out.display(),
            m0.total
        )));
    }
    Ok(found)
}

/// What differs between two manifests: the command, the input's rows, or setting by setting.
fn difference(a: &Manifest, b: &Manifest) -> String {
    if a.command != b.command {
        return format!("command {} vs {}", a.command, b.command);
    }
    if a.total != b.total {
        return format!("an input of {} rows vs {}", a.total, b.total);
    }
    super::settings_difference(&a.settings, &b.settings, "shard 0", "this shard")
}
