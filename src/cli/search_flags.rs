//! The flags `search`, `mine` and `evaluate` share to search through an index, and the clap
//! parsers of the search room's choices (the library's types stay free of clap).
use crate::error::Result;
use crate::search::{
    open_index, AnnIndex, Breadth, Quantization, ScoreFn, StoredCorpus, StoredEmbeddings,
};
use clap::builder::{PossibleValuesParser, TypedValueParser};
use std::path::PathBuf;

/// A parser for one of a library choice's values, by the names the library gives them (help lists
/// them as the possible values).
fn choice<T: Copy + Send + Sync + 'static>(
    all: &'static [T],
    name: fn(T) -> &'static str,
) -> impl TypedValueParser<Value = T> {
    PossibleValuesParser::new(all.iter().map(|&t| name(t))).map(move |s| {
        *all.iter()
            .find(|&&t| name(t) == s)
            .expect("a possible value")
    })
}

/// `--score-fn`: cosine or dot.
pub fn score_fn() -> impl TypedValueParser<Value = ScoreFn> {
    choice(&ScoreFn::ALL, ScoreFn::name)
}

pub fn quantization() -> impl TypedValueParser<Value = Quantization> {
    choice(&Quantization::ALL, Quantization::name)
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
    /// `store` searched through --index (when given) at the breadth asked.
    pub fn over(&self, store: StoredEmbeddings) -> StoredCorpus {
        StoredCorpus {
            store,
            index: self.index.clone(),
            breadth: self.breadth(),
        }
    }

    /// The index asked for, opened over `store` (refused when built from other vectors), and
    /// the breadth to search it at.
    pub fn open(&self, store: &StoredEmbeddings) -> Result<Option<(AnnIndex, usize)>> {
        let Some(path) = &self.index else {
            return Ok(None);
        };
        let index = open_index(path, store)?;
        let breadth = index.breadth(self.breadth())?;
        Ok(Some((index, breadth)))
    }

    pub fn breadth(&self) -> Breadth {
        Breadth {
            ef_search: self.ef_search.map(|v| v as usize),
            probes: self.probes.map(|v| v as usize),
        }
    }
}
