//! `index`: an approximate nearest-neighbour index built once from stored embeddings and saved
//! beside them (`<store>.ivf` or `<store>.usearch`, with its description: description.rs). The
//! build adds the store batch by batch and saves a checkpoint every few minutes: a killed build
//! resumes there. Once built, an IVF's default breadth is calibrated (calibrate.rs), and its
//! second lists kept only where they make searches cheaper.
use super::ann::AnnIndex;
use super::calibrate::{rows_of, sample_picks, Calibration, Calibrator};
use super::description::{
    info_path, partial_path, read_info, write_info, IndexInfo, SecondLists, FORMAT,
};
use super::settings::IndexSettings;
use super::store::StoredEmbeddings;
use crate::error::{Error, Result};
use indicatif::ProgressBar;
use std::path::Path;
use std::time::{Duration, Instant};

/// Rows added between checks for a checkpoint.
const CHUNK: usize = 1024;
/// Building between checkpoints (CONDENSER_INDEX_CHECKPOINT_SECS overrides: tests, big machines).
fn checkpoint_every() -> Duration {
    Duration::from_secs(crate::settings::get().index_checkpoint_secs.unwrap_or(300))
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
    let files = store.fingerprints()?;
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
