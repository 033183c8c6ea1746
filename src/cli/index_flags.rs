//! `condenser index`'s choice of index and its build settings, each refused for the other kind.
use super::search_flags::quantization;
use crate::error::{Error, Result};
use crate::search::{HnswSettings, IndexSettings, Quantization};

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
    /// HNSW: how the graph stores its copy of the vectors; i8, a byte a dimension, walks fastest
    /// in a quarter of f32's memory [default: i8]
    #[arg(long, value_parser = quantization())]
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
