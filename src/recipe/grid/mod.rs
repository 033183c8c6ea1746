//! The domain-transfer grid of Pinecone's "Domain Transfer with BERT", every source x target at
//! once, planned as recipe steps (so a killed grid resumes where it stopped, and a finished cell
//! is never trained again):
//! - the bigram overlap of every domain's train split (`domain-overlap`);
//! - per source: a cross-encoder on its train split (both orders, 1 epoch, the source's lr and
//!   warm-up), its figure on the source's dev split; a bi-encoder on its gold labels;
//! - per (source, target), target labels hidden: (i) the target's train pairs labelled by the
//!   source cross-encoder, (ii) the same plus random sampling top-k; a bi-encoder on each;
//! - per target: every model on the target's held-out split with its true labels.
//!
//! A grid file is a recipe whose `[[step]]` tables prepare the data (split, orient labels), plus a
//! `[grid]` table of settings and one `[[domain]]` table per domain; `{vars}` work in all of them.
mod grid_report;
mod steps;

pub use grid_report::{Cell, GridReport, SourceFigure};
pub use steps::Planning;

use super::{known_keys, read_toml, substitute, Recipe};
use crate::error::{Error, Result};
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// How a target's held-out split is scored: `evaluate`'s evaluator and the metric reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TargetTask {
    /// Graded similarity: spearman_cosine.
    Sts,
    /// 0/1 pairs (1 = similar): cosine_ap.
    Classification,
}

impl TargetTask {
    pub fn flag(self) -> &'static str {
        match self {
            TargetTask::Sts => crate::eval::sts::KIND.flag,
            TargetTask::Classification => crate::eval::classification::KIND.flag,
        }
    }

    pub fn metric(self) -> &'static str {
        match self {
            TargetTask::Sts => "spearman_cosine",
            TargetTask::Classification => "cosine_ap",
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Domain {
    pub name: String,
    /// Labelled pairs (sentence1, sentence2, label in [0, 1], 1 = similar).
    pub train: PathBuf,
    /// Held-out pairs every bi-encoder is scored on when this domain is the target.
    pub test: PathBuf,
    /// The cross-encoder's dev split when this domain is the source (default: `test`).
    #[serde(default)]
    pub dev: Option<PathBuf>,
    pub task: TargetTask,
    /// The cross-encoder's peak learning rate and warm-up fraction on this source.
    pub lr: f64,
    pub warmup: f64,
    /// The article's bert-base cross-encoder figure on this source, shown beside ours.
    #[serde(default)]
    pub article: Option<f64>,
}

impl Domain {
    pub fn dev(&self) -> &Path {
        self.dev.as_deref().unwrap_or(&self.test)
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// The starting model of every cross-encoder and bi-encoder, and the zero-shot baseline.
    pub model: PathBuf,
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Partners per sentence of random sampling in (ii).
    #[serde(default = "default_top_k")]
    pub top_k: usize,
    /// Target train pairs labelled per cell (a seeded sample; 0: all of them).
    #[serde(default)]
    pub target_pairs: usize,
    #[serde(default = "default_batch")]
    pub batch_size: usize,
}

fn default_seed() -> u64 {
    42
}
fn default_top_k() -> usize {
    3
}
fn default_batch() -> usize {
    16
}

pub struct Grid {
    /// The preparation steps, the variables and where the run's state lives.
    pub recipe: Recipe,
    pub settings: Settings,
    pub domains: Vec<Domain>,
}

impl Grid {
    pub fn load(path: &Path, overrides: &[(String, String)]) -> Result<Grid> {
        let doc = read_toml(path)?;
        let bad = |m: String| Error::file(path, m);
        known_keys(&doc, &["vars", "step", "grid", "domain"], "").map_err(bad)?;
        let recipe = Recipe::from_table(path, &doc, overrides)?;
        let table = |name: &str| -> Result<toml::Value> {
            let v = doc
                .get(name)
                .ok_or_else(|| bad(format!("no [{name}] table")))?;
            substituted(v, &recipe.vars).map_err(|m| bad(format!("{name}: {m}")))
        };
        let settings: Settings = table("grid")?
            .try_into()
            .map_err(|e| bad(format!("[grid]: {e}")))?;
        let domains: Vec<Domain> = table("domain")?
            .try_into()
            .map_err(|e| bad(format!("[[domain]]: {e}")))?;
        if domains.len() < 2 {
            return Err(bad("a grid needs at least two [[domain]] tables".into()));
        }
        for (i, d) in domains.iter().enumerate() {
            let ok = !d.name.is_empty()
                && d.name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !ok {
                return Err(bad(format!(
                    "domain '{}': names are letters, digits and '_' (they name folders and steps)",
                    d.name
                )));
            }
            if domains[..i].iter().any(|o| o.name == d.name) {
                return Err(bad(format!("domain '{}' appears twice", d.name)));
            }
            if d.lr.is_nan() || d.lr <= 0.0 || !(0.0..1.0).contains(&d.warmup) {
                return Err(bad(format!(
                    "domain '{}': lr must be > 0 and warmup in [0, 1)",
                    d.name
                )));
            }
        }
        if settings.top_k == 0 || settings.batch_size == 0 {
            return Err(bad("[grid]: top_k and batch_size must be at least 1".into()));
        }
        Ok(Grid {
            recipe,
            settings,
            domains,
        })
    }

    pub fn out(&self) -> &Path {
        &self.recipe.state_dir
    }

    pub fn overlap_json(&self) -> PathBuf {
        self.out().join("overlap/overlap.json")
    }
    pub fn cross_encoder(&self, s: &Domain) -> PathBuf {
        self.out().join("cross-encoders").join(&s.name)
    }
    pub fn gold_biencoder(&self, s: &Domain) -> PathBuf {
        self.out()
            .join("bi-encoders")
            .join(format!("gold-{}", s.name))
    }
    /// The bi-encoder of cell (s, t), (ii) when `augmented`.
    pub fn silver_biencoder(&self, s: &Domain, t: &Domain, augmented: bool) -> PathBuf {
        self.out()
            .join("bi-encoders")
            .join(cell_name(s, t, augmented))
    }
    pub fn silver_pairs(&self, s: &Domain, t: &Domain, augmented: bool) -> PathBuf {
        self.out()
            .join("silver")
            .join(format!("{}.parquet", cell_name(s, t, augmented)))
    }
    pub fn eval_dir(&self, t: &Domain) -> PathBuf {
        self.out().join("eval").join(&t.name)
    }
    pub fn report_dir(&self) -> PathBuf {
        self.out().join("report")
    }
}

/// "stsb-to-medqp", "stsb-to-medqp-aug".
fn cell_name(s: &Domain, t: &Domain, augmented: bool) -> String {
    format!(
        "{}-to-{}{}",
        s.name,
        t.name,
        if augmented { "-aug" } else { "" }
    )
}

/// `v` with {vars} substituted in every string.
fn substituted(
    v: &toml::Value,
    vars: &std::collections::BTreeMap<String, String>,
) -> std::result::Result<toml::Value, String> {
    Ok(match v {
        toml::Value::String(s) => toml::Value::String(substitute(s, vars)?),
        toml::Value::Array(xs) => toml::Value::Array(
            xs.iter()
                .map(|x| substituted(x, vars))
                .collect::<std::result::Result<_, _>>()?,
        ),
        toml::Value::Table(t) => toml::Value::Table(
            t.iter()
                .map(|(k, x)| Ok((k.clone(), substituted(x, vars)?)))
                .collect::<std::result::Result<_, String>>()?,
        ),
        x => x.clone(),
    })
}
