//! How mining runs: where candidates come from, how negatives are picked and written, the score
//! and margin filters and the rank window (`MineOptions`, the `mine` flags), and the models it
//! runs with (`Miners`).
use crate::error::{Error, Result};
use crate::model::{CrossEncoderModel, SentenceEncoder};
use crate::search::{Breadth, StoredEmbeddings};
use std::path::Path;

/// Where candidates come from (`--candidates`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Candidates {
    /// Nearest documents by the bi-encoder's cosine (exact search).
    BiEncoder,
    /// Top documents by BM25 (k1 1.2, b 0.75); scores are BM25's.
    Bm25,
    /// Both lists merged, ranked by the bi-encoder's cosine (AugSBERT's BM25 + semantic search).
    Both,
}

/// How negatives are picked from the candidates that survive the filters (`--sampling`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum NegativeSampling {
    /// The highest-scored ones.
    Top,
    /// Uniformly among them, seeded; then ordered by score.
    Random,
}

/// Rows written (`--format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MinedFormat {
    /// anchor, positive, negative_1..N: only pairs that got all N negatives.
    NTuple,
    /// anchor, positive, negative: one row per negative.
    Triplet,
    /// anchor, positive, label: each positive (label 1) then each negative (label 0) of an anchor
    /// once: cross-encoder training data.
    LabeledPair,
}

/// How candidates are found, filtered and picked, and how rows are written: `mine`'s flags.
#[derive(Clone, Debug, serde::Serialize, clap::Args)]
pub struct MineOptions {
    #[arg(long, value_enum, default_value = "bi-encoder")]
    pub candidates: Candidates,
    /// Skip the first candidates (the most likely false negatives)
    #[arg(long, default_value_t = 0)]
    pub range_min: usize,
    /// Consider candidates up to this rank [default: range-min + num-negatives, + 10 x
    /// num-negatives with a filter]
    #[arg(long)]
    pub range_max: Option<usize>,
    /// Hard negatives kept per anchor (from the candidates the filters leave)
    #[arg(long, default_value_t = 3, value_parser = at_least_one())]
    pub num_negatives: usize,
    #[arg(long, value_enum, default_value = "top")]
    pub sampling: NegativeSampling,
    #[command(flatten)]
    #[serde(flatten)]
    pub seed: crate::flags::Seed,
    /// Drop candidates scoring above this
    #[arg(long)]
    pub max_score: Option<f32>,
    /// Drop candidates scoring below this
    #[arg(long)]
    pub min_score: Option<f32>,
    /// Drop candidates within this of the anchor's hardest positive's score
    #[arg(long)]
    pub absolute_margin: Option<f32>,
    /// Drop candidates above the hardest positive's score minus this fraction of it
    #[arg(long)]
    pub relative_margin: Option<f32>,
    #[arg(long, value_enum, default_value = "n-tuple")]
    pub format: MinedFormat,
    #[command(flatten)]
    #[serde(flatten)]
    pub batch: crate::flags::InferenceBatch,
}

fn at_least_one() -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::new().range(1..)
}

impl MineOptions {
    pub(super) fn filters(&self) -> bool {
        self.max_score.is_some()
            || self.min_score.is_some()
            || self.absolute_margin.is_some()
            || self.relative_margin.is_some()
    }

    /// range_max as sentence-transformers derives it when not given.
    pub fn range_max(&self) -> usize {
        self.range_max.unwrap_or_else(|| {
            let spare = if self.filters() {
                10 * self.num_negatives
            } else {
                0
            };
            self.range_min + self.num_negatives + spare
        })
    }

    pub(super) fn validate(&self, cross_encoder: bool) -> Result<()> {
        let max = self.range_max();
        if self.num_negatives == 0 {
            return Err(Error::msg("--num-negatives must be at least 1"));
        }
        if self.range_min >= max || self.num_negatives > max - self.range_min {
            return Err(Error::msg(format!(
                "--num-negatives {} does not fit in ranks [{}, {max}) (--range-min, --range-max)",
                self.num_negatives, self.range_min
            )));
        }
        if self.filters() && self.candidates == Candidates::Bm25 && !cross_encoder {
            return Err(Error::msg(
                "--max-score/--min-score/--absolute-margin/--relative-margin compare scores, and BM25 scores \
                 have no fixed scale: rescore with --cross-encoder or mine with the bi-encoder",
            ));
        }
        Ok(())
    }
}

/// The models mining uses: a bi-encoder unless candidates are BM25 alone; a cross-encoder to
/// rescore (its scores drive the filters, the ranking and the written scores).
pub struct Miners<'m> {
    pub encoder: Option<&'m SentenceEncoder>,
    pub cross_encoder: Option<&'m CrossEncoderModel>,
    /// The corpus's vectors as `encode` stored them (checked against `encoder`): read, not
    /// re-embedded.
    pub stored: Option<&'m StoredEmbeddings>,
    /// An index of `stored` (its file, and how wide to search): candidates from its graph,
    /// scored exactly.
    pub index: Option<(&'m Path, Breadth)>,
}
