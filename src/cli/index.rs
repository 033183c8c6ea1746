use super::{out, progress};
use condenser::encode::{build_index, default_index_path, Calibration, StoredEmbeddings};
use condenser::error::Result;
use condenser::eval::retrieval::{Breadth, IndexFlags, DEFAULT_EF_SEARCH};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// The corpus's embeddings as `condenser encode` wrote them (a file, or the folder of a
    /// sharded encode)
    #[arg(long)]
    corpus_embeddings: PathBuf,
    #[command(flatten)]
    flags: IndexFlags,
    /// The index file (its description is written beside it as FILE.json)
    /// [default: beside the embeddings, NAME.ivf or NAME.usearch (index.* in a shard folder)]
    #[arg(long)]
    out: Option<PathBuf>,
}

/// Searching through an index: the flags `search`, `mine` and `evaluate` share.
#[derive(clap::Args)]
pub struct UseIndex {
    /// An index of --corpus-embeddings (`condenser index`): candidates from it, scored exactly;
    /// refused when built from other embeddings
    #[arg(long, requires = "corpus_embeddings")]
    pub index: Option<PathBuf>,
    /// With an IVF --index: lists scanned per query (more: better recall, slower)
    /// [default: the index's calibrated breadth]
    #[arg(long, requires = "index", value_parser = clap::value_parser!(u64).range(1..))]
    pub probes: Option<u64>,
    /// With an HNSW --index: how wide each query's walk of the graph is
    /// [default: the index's calibrated breadth]
    #[arg(long, requires = "index", value_parser = clap::value_parser!(u64).range(1..))]
    pub ef_search: Option<u64>,
}

impl UseIndex {
    pub fn breadth(&self) -> Breadth {
        Breadth {
            ef_search: self.ef_search.map(|v| v as usize),
            probes: self.probes.map(|v| v as usize),
        }
    }
}

pub fn run(a: Args) -> Result<()> {
    let store = StoredEmbeddings::open_as_made(&a.corpus_embeddings)?;
    let (settings, target) = a.flags.resolve(store.rows()?)?;
    let dest = a
        .out
        .unwrap_or_else(|| default_index_path(&a.corpus_embeddings, &settings));
    let bar = progress::bar(Some(0), "vectors indexed");
    let s = build_index(&store, &settings, target, &dest, &bar)?;
    bar.finish_and_clear();
    let resumed = match (s.resumed_at, s.discarded_checkpoint) {
        (0, true) => " (its checkpoint was of other settings or embeddings: started over)".into(),
        (0, false) => String::new(),
        (n, _) => format!(" (resumed at row {n})"),
    };
    out(&format!(
        "indexed {} vectors{resumed} -> {} ({:.0} MB; {}) in {:.1} s\n",
        s.rows,
        dest.display(),
        s.bytes as f64 / 1e6,
        settings.describe(),
        s.seconds
    ));
    let how = |c: &Calibration| {
        format!(
            "recall@10 {:.4} against exact search for {} of its own vectors",
            c.recall, c.queries
        )
    };
    out(&match &s.calibration {
        None => format!(
            "searches default to {} {DEFAULT_EF_SEARCH} (a graph's breadth is not calibrated)\n",
            s.breadth_flag
        ),
        Some(c) if c.reached() => {
            format!("searches default to {} {} ({})\n", s.breadth_flag, c.breadth, how(c))
        }
        Some(c) => format!(
            "warning: no breadth tried reached recall@10 {}: searches default to the widest, {} {} ({})\n",
            c.target_recall, s.breadth_flag, c.breadth, how(c)
        ),
    });
    if let (Some(c), Some(second)) = (&s.calibration, &s.second_lists) {
        out(&format!("{}\n", second.describe(c, s.breadth_flag)));
    }
    Ok(())
}
