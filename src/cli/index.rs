use super::{out, progress};
use condenser::encode::{build_index, default_index_path, Calibration, StoredEmbeddings};
use condenser::error::{Error, Result};
use condenser::eval::retrieval::{
    Breadth, HnswSettings, IndexSettings, Quantization, DEFAULT_EF_SEARCH,
};
use std::path::PathBuf;

/// Which index `index` builds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    /// k-means lists, each scanned for all the queries probing it by one GEMM: fast to build,
    /// fastest for batches of queries (mine, evaluate, search of many queries)
    Ivf,
    /// usearch's HNSW graph, walked one query at a time
    Hnsw,
}

#[derive(clap::Args)]
pub struct Args {
    /// The corpus's embeddings as `condenser encode` wrote them (a file, or the folder of a
    /// sharded encode)
    #[arg(long)]
    corpus_embeddings: PathBuf,
    #[arg(long, value_enum, default_value = "ivf")]
    kind: Kind,
    /// IVF: how many lists (k-means centroids) [default: 4 x the square root of the rows]
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    lists: Option<u64>,
    /// HNSW: links per node (M): more give better recall, a slower build and a bigger index
    /// [default: 32]
    #[arg(long, value_parser = clap::value_parser!(u64).range(2..=1024))]
    connectivity: Option<u64>,
    /// HNSW: candidates weighed while linking each vector (efConstruction) [default: 256]
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    ef_construction: Option<u64>,
    /// HNSW: how the graph stores its copy of the vectors [default: i8]
    #[arg(long, value_enum)]
    quantization: Option<Quantization>,
    /// The recall@10 against exact search the default search breadth is calibrated to reach
    /// (measured on 1,000 of the corpus's own vectors once the index is built)
    /// [default: 0.98; IVF only]
    #[arg(long, value_parser = recall)]
    target_recall: Option<f64>,
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

/// The settings the flags ask for, refusing a flag of the other kind.
fn settings(a: &Args, rows: usize) -> Result<IndexSettings> {
    let hnsw_flag = [
        (a.connectivity.is_some(), "--connectivity"),
        (a.ef_construction.is_some(), "--ef-construction"),
        (a.quantization.is_some(), "--quantization"),
    ];
    let ivf_flag = [
        (a.lists.is_some(), "--lists"),
        (a.target_recall.is_some(), "--target-recall"),
    ];
    Ok(match a.kind {
        Kind::Ivf => {
            if let Some((_, flag)) = hnsw_flag.iter().find(|f| f.0) {
                return Err(Error::msg(format!(
                    "{flag} is for --kind hnsw (this is an IVF index)"
                )));
            }
            IndexSettings::ivf(rows, a.lists)
        }
        Kind::Hnsw => {
            if let Some((_, flag)) = ivf_flag.iter().find(|f| f.0) {
                return Err(Error::msg(format!(
                    "{flag} is for --kind ivf (this is an HNSW graph)"
                )));
            }
            IndexSettings::Hnsw(HnswSettings {
                connectivity: a.connectivity.unwrap_or(32),
                ef_construction: a.ef_construction.unwrap_or(256),
                quantization: a.quantization.unwrap_or(Quantization::I8),
            })
        }
    })
}

pub fn run(a: Args) -> Result<()> {
    let store = StoredEmbeddings::open_as_made(&a.corpus_embeddings)?;
    let settings = settings(&a, store.rows()?)?;
    let dest = a
        .out
        .unwrap_or_else(|| default_index_path(&a.corpus_embeddings, &settings));
    let bar = progress::bar(Some(0), "vectors indexed");
    let target = match a.kind {
        Kind::Ivf => Some(a.target_recall.unwrap_or(0.98)),
        Kind::Hnsw => None,
    };
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
    Ok(())
}

fn recall(s: &str) -> std::result::Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if r > 0.0 && r <= 1.0 => Ok(r),
        _ => Err(format!("{s} is not a recall in (0, 1]")),
    }
}
