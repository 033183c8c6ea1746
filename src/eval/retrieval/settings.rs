//! How an index is built (saved in its description, compared on resume) and searched, and the
//! `index` flags that choose it, each refused for the other kind.
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

/// Which index `index` builds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum IndexKind {
    /// k-means lists, each scanned for all the queries probing it by one GEMM: fast to build,
    /// fastest for batches of queries (mine, evaluate, search of many queries)
    Ivf,
    /// usearch's HNSW graph, walked one query at a time
    Hnsw,
}

/// `condenser index`'s choice of index.
#[derive(Clone, Debug, clap::Args)]
pub struct IndexFlags {
    #[arg(long, value_enum, default_value = "ivf")]
    pub kind: IndexKind,
    /// IVF: how many lists (k-means centroids) [default: 4 x the square root of the rows]
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub lists: Option<u64>,
    /// IVF: the recall@10 against exact search the default --probes is calibrated to reach
    /// (measured on 1,000 of the corpus's own vectors once built) [default: 0.98]
    #[arg(long, value_parser = recall)]
    pub target_recall: Option<f64>,
    /// HNSW: links per node (M): more give better recall, a slower build and a bigger index
    /// [default: 32]
    #[arg(long, value_parser = clap::value_parser!(u64).range(2..=1024))]
    pub connectivity: Option<u64>,
    /// HNSW: candidates weighed while linking each vector (efConstruction) [default: 256]
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub ef_construction: Option<u64>,
    /// HNSW: how the graph stores its copy of the vectors [default: i8]
    #[arg(long, value_enum)]
    pub quantization: Option<Quantization>,
}

fn recall(s: &str) -> std::result::Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if r > 0.0 && r <= 1.0 => Ok(r),
        _ => Err(format!("{s} is not a recall in (0, 1]")),
    }
}

impl IndexFlags {
    /// The settings asked for an index of `rows` vectors and the recall its default breadth is
    /// calibrated to (an IVF's), refusing a flag of the other kind.
    pub fn resolve(&self, rows: usize) -> Result<(IndexSettings, Option<f64>)> {
        let given = |flags: &[(bool, &'static str)]| flags.iter().find(|f| f.0).map(|f| f.1);
        let refuse = |flag: &str, kind: &str, this: &str| {
            Err(Error::msg(format!(
                "{flag} is for --kind {kind} (this is {this})"
            )))
        };
        match self.kind {
            IndexKind::Ivf => {
                let hnsw = [
                    (self.connectivity.is_some(), "--connectivity"),
                    (self.ef_construction.is_some(), "--ef-construction"),
                    (self.quantization.is_some(), "--quantization"),
                ];
                if let Some(flag) = given(&hnsw) {
                    return refuse(flag, "hnsw", "an IVF index");
                }
                let target = self.target_recall.unwrap_or(0.98);
                Ok((IndexSettings::ivf(rows, self.lists), Some(target)))
            }
            IndexKind::Hnsw => {
                let ivf = [
                    (self.lists.is_some(), "--lists"),
                    (self.target_recall.is_some(), "--target-recall"),
                ];
                if let Some(flag) = given(&ivf) {
                    return refuse(flag, "ivf", "an HNSW graph");
                }
                let h = HnswSettings {
                    connectivity: self.connectivity.unwrap_or(32),
                    ef_construction: self.ef_construction.unwrap_or(256),
                    quantization: self.quantization.unwrap_or(Quantization::I8),
                };
                Ok((IndexSettings::Hnsw(h), None))
            }
        }
    }
}

/// How the index stores its copy of the vectors (scores always come from the f32 vectors).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Quantization {
    F32,
    F16,
    /// A byte a dimension: a quarter of f32's memory, the fastest graph walk.
    I8,
}

/// How an HNSW graph is built (M and efConstruction; defaults measured at 1M vectors to reach
/// recall@10 0.98 at the default --ef-search).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HnswSettings {
    pub connectivity: u64,
    pub ef_construction: u64,
    pub quantization: Quantization,
}

/// Which index, built how (saved in its description; a checkpoint resumes only the same).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum IndexSettings {
    Hnsw(HnswSettings),
    Ivf {
        lists: u64,
        /// Vectors the k-means is trained on (a seeded sample of the store).
        sample: u64,
    },
}

impl IndexSettings {
    /// An IVF of `lists` lists (4 x the root of the rows unless given, as faiss advises),
    /// trained on up to 64 vectors a list.
    pub fn ivf(rows: usize, lists: Option<u64>) -> IndexSettings {
        let lists = lists.unwrap_or((4.0 * (rows as f64).sqrt()).round().max(1.0) as u64);
        IndexSettings::Ivf {
            lists,
            sample: (64 * lists).min(rows as u64),
        }
    }

    /// The settings in a few words, for summaries.
    pub fn describe(&self) -> String {
        match self {
            IndexSettings::Hnsw(h) => format!(
                "HNSW, M {}, ef_construction {}, {:?}",
                h.connectivity, h.ef_construction, h.quantization
            ),
            IndexSettings::Ivf { lists, sample } => {
                format!("IVF, {lists} lists trained on {sample} vectors")
            }
        }
    }
}

/// Breadth of each query's graph walk when none is given (recall@10 0.98 at 1M with the
/// default build: benches/README.md).
pub const DEFAULT_EF_SEARCH: usize = 128;
/// IVF lists scanned per query when none is given and the index has no calibrated breadth.
pub const DEFAULT_PROBES: usize = 32;

/// How wide a search through an index looks, as asked (`--ef-search` is the graph's,
/// `--probes` the IVF's; each is refused for the other kind).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct Breadth {
    pub ef_search: Option<usize>,
    pub probes: Option<usize>,
}
