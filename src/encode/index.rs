//! `index`: an approximate nearest-neighbour index built once from stored embeddings and saved
//! beside them (`<store>.ivf` or `<store>.usearch`, and its description `<that>.json`). The description
//! names the store it was built from (each file's size and a hash of its Parquet footer, which
//! changes with any re-encode), so an index is never used with other vectors. The build adds the
//! store batch by batch and saves a checkpoint every few minutes: a killed build resumes there.
use super::calibrate::{rows_of, sample_picks, Calibration, Calibrator};
use super::StoredEmbeddings;
use crate::error::{Error, Result};
use crate::eval::retrieval::{AnnIndex, Breadth, IndexSettings, IndexedCorpus};
use crate::eval::CorpusVectors;
use crate::shard::Settings;
use indicatif::ProgressBar;
use serde::{Deserialize, Serialize};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

const FORMAT: &str = "condenser.index/3";
/// Rows added between checks for a checkpoint.
const CHUNK: usize = 1024;
/// Building between checkpoints (CONDENSER_INDEX_CHECKPOINT_SECS overrides: tests, big machines).
fn checkpoint_every() -> Duration {
    let secs = std::env::var("CONDENSER_INDEX_CHECKPOINT_SECS").ok();
    Duration::from_secs(secs.and_then(|s| s.parse().ok()).unwrap_or(300))
}

/// One store file as the index knows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreFile {
    pub name: String,
    pub bytes: u64,
    /// xxh3 of the file's last MiB (the Parquet footer: schema, row groups, statistics).
    pub tail_xxh3: String,
}

/// The description saved beside an index.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct IndexInfo {
    pub format: String,
    pub settings: IndexSettings,
    pub embeddings: super::EmbeddingsMeta,
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

fn store_file(path: &Path) -> Result<StoreFile> {
    let mut f = std::fs::File::open(path).map_err(|e| Error::file(path, e))?;
    let bytes = f.metadata().map_err(|e| Error::file(path, e))?.len();
    let tail = bytes.min(1 << 20);
    let mut buf = vec![0u8; tail as usize];
    f.seek(SeekFrom::Start(bytes - tail))
        .and_then(|_| f.read_exact(&mut buf))
        .map_err(|e| Error::file(path, e))?;
    Ok(StoreFile {
        name: path
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default(),
        bytes,
        tail_xxh3: format!("{:016x}", xxhash_rust::xxh3::xxh3_64(&buf)),
    })
}

/// Each of `store`'s files as an index records it.
fn store_files(store: &StoredEmbeddings) -> Result<Vec<StoreFile>> {
    store.files.iter().map(|f| store_file(f)).collect()
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

fn info_path(index: &Path) -> PathBuf {
    let mut p = index.as_os_str().to_owned();
    p.push(".json");
    PathBuf::from(p)
}

/// The description of the finished index at `index`, refused where there is none.
fn finished_info_path(index: &Path) -> Result<PathBuf> {
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

/// `settings` (a shard manifest's) with what they record of stored embeddings and of an index of
/// them: each store file as an index records it (size, footer hash), and the index's description
/// and file likewise. A store re-encoded or an index rebuilt between two shards of a run then
/// stops their merge, where the paths alone would let it through.
pub fn with_inputs(
    mut settings: Settings,
    stores: &[&Path],
    index: Option<&Path>,
) -> Result<Settings> {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    let mut add =
        |f: &StoreFile| h.update(serde_json::to_string(f).expect("serializes").as_bytes());
    for s in stores {
        store_files(&StoredEmbeddings::open_as_made(s)?)?
            .iter()
            .for_each(&mut add);
    }
    if let Some(p) = index {
        add(&store_file(&finished_info_path(p)?)?);
        add(&store_file(p)?);
    }
    let f = format!("{:016x}", h.digest());
    settings.insert("inputs_fingerprint".into(), f.into());
    Ok(settings)
}

fn partial_path(index: &Path) -> PathBuf {
    let mut p = index.as_os_str().to_owned();
    p.push(".partial");
    PathBuf::from(p)
}

fn read_info(path: &Path) -> Result<IndexInfo> {
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

fn write_info(path: &Path, info: &IndexInfo) -> Result<()> {
    let json = serde_json::to_vec_pretty(info).expect("serializes");
    crate::data::write_atomic(path, &json)
}

/// What a build did.
pub struct BuildSummary {
    pub rows: usize,
    pub resumed_at: usize,
    /// A checkpoint was found but built otherwise (settings or embeddings): started over.
    pub discarded_checkpoint: bool,
    pub seconds: f64,
    pub bytes: u64,
    /// The default breadth measured (an IVF's; a graph's is fixed).
    pub calibration: Option<Calibration>,
    pub second_lists: Option<SecondLists>,
    /// The flag that sets the breadth calibrated.
    pub breadth_flag: &'static str,
}

/// Build the index of `store` at `dest` (resuming a checkpoint of the same store and settings)
/// and calibrate its default breadth to `target_recall` (an IVF's). `progress` counts rows.
pub fn build_index(
    store: &StoredEmbeddings,
    settings: &IndexSettings,
    target_recall: Option<f64>,
    dest: &Path,
    progress: &ProgressBar,
) -> Result<BuildSummary> {
    let files = store_files(store)?;
    let rows = store.rows()?;
    let dim = store.meta.dim;
    let mut info = IndexInfo {
        format: FORMAT.into(),
        settings: settings.clone(),
        embeddings: store.meta.clone(),
        store: files,
        rows,
        rows_done: 0,
        build_seconds: 0.0,
        calibration: None,
        second_lists: None,
    };
    let partial = partial_path(dest);
    let checkpoint = info_path(&partial).exists();
    let resumable = read_info(&info_path(&partial)).ok().filter(|p| {
        p.settings == info.settings && p.store == info.store && p.embeddings == info.embeddings
    });
    // a checkpoint of other settings or embeddings is started over, and the summary says so
    let discarded_checkpoint = checkpoint && resumable.is_none();
    let t0 = Instant::now();
    let mut index = match &resumable {
        Some(p) => {
            info.build_seconds = p.build_seconds;
            AnnIndex::load(&partial, dim, rows, settings)?
        }
        None => AnnIndex::create(dim, rows, settings, |n| {
            rows_of(store, &sample_picks(rows, n, 0))
        })?,
    };
    // rows are added in order, so the checkpoint holds rows 0 .. its length (a kill between
    // writing the index and its description leaves the description a checkpoint behind)
    if index.len() > rows {
        return Err(Error::file(
            &partial,
            "the checkpoint holds more vectors than the store: delete it and build again",
        ));
    }
    info.rows_done = index.len();
    let resumed_at = info.rows_done;
    progress.set_length(rows as u64);
    progress.set_position(resumed_at as u64);
    let (mut last, every) = (Instant::now(), checkpoint_every());
    store.for_each(false, |first, b, v| {
        for start in (0..b.num_rows()).step_by(CHUNK) {
            let end = (start + CHUNK).min(b.num_rows());
            if first + end <= info.rows_done {
                continue;
            }
            let from = info.rows_done.max(first + start) - first;
            index.add(first + from, &v[from * dim..end * dim])?;
            info.rows_done = first + end;
            progress.set_position(info.rows_done as u64);
            if last.elapsed() >= every && info.rows_done < rows {
                index.save(&partial)?;
                let mut at = info.clone();
                at.build_seconds += t0.elapsed().as_secs_f64();
                write_info(&info_path(&partial), &at)?;
                last = Instant::now();
            }
        }
        Ok(())
    })?;
    index.save(dest)?;
    let breadth_flag = index.breadth_flag();
    if let Some(target) = target_recall {
        // read back as searches read it (an IVF's entries then lie in list order)
        drop(index);
        let mut index = AnnIndex::load(dest, dim, rows, settings)?;
        let calibrator = Calibrator::new(store, rows)?;
        let two = calibrator.run(&index, target)?;
        info.calibration = two.clone();
        if let (Some(two), true) = (two, index.drop_second_lists()) {
            let one = calibrator
                .run(&index, target)?
                .expect("an IVF is calibrated");
            let kept = !one.cheaper_than(&two);
            if !kept {
                index.save(dest)?;
            }
            let (chosen, other) = if kept { (two, one) } else { (one, two) };
            info.calibration = Some(chosen);
            info.second_lists = Some(SecondLists { kept, other });
        }
    }
    info.build_seconds += t0.elapsed().as_secs_f64();
    // the description last: an index without one is never used
    write_info(&info_path(dest), &info)?;
    for p in [info_path(&partial), partial] {
        if p.exists() {
            std::fs::remove_file(&p).map_err(|e| Error::file(&p, e))?;
        }
    }
    Ok(BuildSummary {
        rows,
        resumed_at,
        discarded_checkpoint,
        seconds: info.build_seconds,
        calibration: info.calibration.clone(),
        second_lists: info.second_lists.clone(),
        breadth_flag,
        bytes: std::fs::metadata(dest)
            .map_err(|e| Error::file(dest, e))?
            .len(),
    })
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
    let now = store_files(store)?;
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

/// The index at `path` over `store`, for a corpus whose texts `lookup_rows` matched.
pub fn indexed_corpus(
    path: &Path,
    store: &StoredEmbeddings,
    docs_of_row: Vec<Vec<u32>>,
    breadth: Breadth,
) -> Result<IndexedCorpus> {
    let index = open_index(path, store)?;
    Ok(IndexedCorpus {
        breadth: index.breadth(breadth)?,
        index: Arc::new(index),
        docs_of_row: Arc::new(docs_of_row),
        normalized: store.meta.normalize,
    })
}

/// Evaluation's corpus vectors from `store`, through the index at `index` when given.
pub fn corpus_vectors(
    store: StoredEmbeddings,
    index: Option<PathBuf>,
    breadth: Breadth,
) -> CorpusVectors {
    CorpusVectors(Arc::new(move |texts| match &index {
        None => Ok((store.lookup(texts)?, None)),
        Some(path) => {
            let (vectors, rows) = store.lookup_rows(texts)?;
            Ok((vectors, Some(indexed_corpus(path, &store, rows, breadth)?)))
        }
    }))
}
