//! An index's description, saved beside it as `<index>.json`: how it was built, from which
//! store (fingerprint.rs: an index is never used with other vectors), and its calibrated breadth.
//! The description is written last, so an index without one (a killed build) is never opened;
//! a build's checkpoint is `<index>.partial` with its own description.
use super::ann::AnnIndex;
use super::calibrate::Calibration;
use super::settings::IndexSettings;
use super::store::{EmbeddingsMeta, StoreFile, StoredEmbeddings};
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

pub const FORMAT: &str = "condenser.index/3";

/// The description saved beside an index.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct IndexInfo {
    pub format: String,
    pub settings: IndexSettings,
    pub embeddings: EmbeddingsMeta,
    pub store: Vec<StoreFile>,
    pub rows: usize,
    /// Rows added so far (a checkpoint's; equals `rows` once built).
    pub rows_done: usize,
    pub build_seconds: f64,
    /// The default search breadth, measured once built (none in a checkpoint).
    pub calibration: Option<Calibration>,
    /// An IVF's second lists, kept or dropped by the calibration.
    pub second_lists: Option<SecondLists>,
}

/// Whether an IVF keeps each vector's second list (`kmeans::assign_spilled`): kept where they
/// cut the entries a search scans for the target recall (real sentence embeddings, 100k: 64
/// probes instead of 192, a third fewer entries), dropped where the lists alone do better (the
/// synthetic 1M: twice the entries a list for a third fewer probes); `other` is the calibration
/// of the choice not taken.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SecondLists {
    pub kept: bool,
    pub other: Calibration,
}

impl SecondLists {
    /// The choice and both costs, `chosen` being the calibration kept.
    pub fn describe(&self, chosen: &Calibration, flag: &str) -> String {
        let cost = |c: &Calibration| {
            let scanned = c.scanned.unwrap_or(0.0);
            format!("{scanned:.0} entries a query at {flag} {}", c.breadth)
        };
        let (with, without, filed) = match self.kept {
            true => (chosen, &self.other, "two lists"),
            false => (&self.other, chosen, "one list (second lists dropped)"),
        };
        format!(
            "each vector filed under {filed}: {} with second lists, {} without",
            cost(with),
            cost(without)
        )
    }
}

/// Where `index` saves the index of the store at `store` unless told: beside it.
pub fn default_index_path(store: &Path, settings: &IndexSettings) -> PathBuf {
    let ext = match settings {
        IndexSettings::Hnsw(_) => "usearch",
        IndexSettings::Ivf { .. } => "ivf",
    };
    match store.is_dir() {
        true => store.join("index").with_extension(ext),
        false => store.with_extension(ext),
    }
}

pub fn info_path(index: &Path) -> PathBuf {
    let mut p = index.as_os_str().to_owned();
    p.push(".json");
    PathBuf::from(p)
}

/// The description of the finished index at `index`, refused where there is none.
pub fn finished_info_path(index: &Path) -> Result<PathBuf> {
    let ipath = info_path(index);
    if !ipath.exists() {
        return Err(Error::file(
            index,
            format!(
                "no {} beside it: not a finished `condenser index` (build it again)",
                ipath.display()
            ),
        ));
    }
    Ok(ipath)
}

pub fn partial_path(index: &Path) -> PathBuf {
    let mut p = index.as_os_str().to_owned();
    p.push(".partial");
    PathBuf::from(p)
}

pub fn read_info(path: &Path) -> Result<IndexInfo> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::file(path, e))?;
    let info: IndexInfo = serde_json::from_str(&text).map_err(|e| Error::file(path, e))?;
    if info.format != FORMAT {
        return Err(Error::file(
            path,
            format!(
                "format {} (this version reads {FORMAT}): build it again with `condenser index`",
                info.format
            ),
        ));
    }
    Ok(info)
}

pub fn write_info(path: &Path, info: &IndexInfo) -> Result<()> {
    let json = serde_json::to_vec_pretty(info).expect("serializes");
    crate::data::write_atomic(path, &json)
}

/// Open the index at `path`, refusing one built from other vectors than `store`'s.
pub fn open_index(path: &Path, store: &StoredEmbeddings) -> Result<AnnIndex> {
    let info = read_info(&finished_info_path(path)?)?;
    if info.embeddings != store.meta {
        return Err(Error::file(
            path,
            "built from embeddings made otherwise than these (model or settings): build it again with `condenser index`",
        ));
    }
    let now = store.fingerprints()?;
    if now != info.store {
        let what = match now.iter().zip(&info.store).find(|(a, b)| a != b) {
            Some((a, _)) => format!("{} has changed since", a.name),
            None => format!(
                "the store has {} files, the index was built from {}",
                now.len(),
                info.store.len()
            ),
        };
        return Err(Error::file(
            path,
            format!("stale: {what} the index was built; build it again with `condenser index`"),
        ));
    }
    let mut index = AnnIndex::load(path, info.embeddings.dim, info.rows, &info.settings)?;
    index.calibrated = info.calibration.map(|c| c.breadth);
    if index.len() != info.rows {
        return Err(Error::file(
            path,
            format!(
                "holds {} vectors, its description {}",
                index.len(),
                info.rows
            ),
        ));
    }
    Ok(index)
}
