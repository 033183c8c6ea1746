//! How an index is built (saved in its description, compared on resume) and how wide a search
//! through it looks.
use serde::{Deserialize, Serialize};

/// How the index stores its copy of the vectors (scores always come from the f32 vectors).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Quantization {
    F32,
    F16,
    /// A byte a dimension: a quarter of f32's memory, the fastest graph walk.
    I8,
}

impl Quantization {
    pub const ALL: [Quantization; 3] = [Quantization::F32, Quantization::F16, Quantization::I8];

    /// The name in flags and descriptions (serde's).
    pub fn name(self) -> &'static str {
        match self {
            Quantization::F32 => "f32",
            Quantization::F16 => "f16",
            Quantization::I8 => "i8",
        }
    }
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
