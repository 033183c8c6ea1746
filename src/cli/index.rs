use super::{out, progress};
use condenser::encode::{build_index, default_index_path, StoredEmbeddings};
use condenser::error::Result;
use condenser::eval::retrieval::{IndexSettings, DEFAULT_EF_SEARCH};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// The corpus's embeddings as `condenser encode` wrote them (a file, or the folder of a
    /// sharded encode)
    #[arg(long)]
    corpus_embeddings: PathBuf,
    #[command(flatten)]
    settings: IndexSettings,
    /// The index file (its description is written beside it as FILE.json)
    /// [default: beside the embeddings, NAME.usearch, or index.usearch in a shard folder]
    #[arg(long)]
    out: Option<PathBuf>,
}

/// Searching through an index: the flags `search`, `mine` and `evaluate` share.
#[derive(clap::Args)]
pub struct UseIndex {
    /// An index of --corpus-embeddings (`condenser index`): candidates from its graph, scored
    /// exactly; refused when built from other embeddings
    #[arg(long, requires = "corpus_embeddings")]
    pub index: Option<PathBuf>,
    /// With --index: how wide each query's walk of the graph is (more: better recall, slower)
    #[arg(long, default_value_t = DEFAULT_EF_SEARCH as u64, requires = "index",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub ef_search: u64,
}

pub fn run(a: Args) -> Result<()> {
    let store = StoredEmbeddings::open_as_made(&a.corpus_embeddings)?;
    let dest = a
        .out
        .unwrap_or_else(|| default_index_path(&a.corpus_embeddings));
    let bar = progress::bar(Some(0), "vectors indexed");
    let s = build_index(&store, &a.settings, &dest, &bar)?;
    bar.finish_and_clear();
    let resumed = match (s.resumed_at, s.discarded_checkpoint) {
        (0, true) => " (its checkpoint was of other settings or embeddings: started over)".into(),
        (0, false) => String::new(),
        (n, _) => format!(" (resumed at row {n})"),
    };
    out(&format!(
        "indexed {} vectors{resumed} -> {} ({:.0} MB; M {}, ef_construction {}, {:?}) in {:.1} s\n",
        s.rows,
        dest.display(),
        s.bytes as f64 / 1e6,
        a.settings.connectivity,
        a.settings.ef_construction,
        a.settings.quantization,
        s.seconds
    ));
    Ok(())
}
