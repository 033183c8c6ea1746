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
//! A grid file is a recipe whose [[step]] tables prepare the data (split, orient labels), plus a
//! [grid] table of settings and one [[domain]] table per domain; {vars} work in all of them.
mod report;

pub use report::{Cell, GridReport, SourceFigure};

use super::{read_toml, substitute, Recipe, Step};
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
            TargetTask::Sts => "sts",
            TargetTask::Classification => "classification",
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
        let recipe = Recipe::from_table(path, &doc, overrides)?;
        let bad = |m: String| Error::file(path, m);
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
    fn silver_pairs(&self, s: &Domain, t: &Domain, augmented: bool) -> PathBuf {
        self.out()
            .join("silver")
            .join(format!("{}.parquet", cell_name(s, t, augmented)))
    }
    /// The pairs of `t` the cross-encoders label: its train split, or a seeded sample of it.
    fn target_pairs(&self, t: &Domain) -> Result<PathBuf> {
        Ok(if self.samples(t)? {
            self.out()
                .join("targets")
                .join(format!("{}.parquet", t.name))
        } else {
            t.train.clone()
        })
    }
    fn samples(&self, t: &Domain) -> Result<bool> {
        let cap = self.settings.target_pairs;
        Ok(cap > 0 && crate::data::count_rows(&t.train)? > cap)
    }
    pub fn eval_dir(&self, t: &Domain) -> PathBuf {
        self.out().join("eval").join(&t.name)
    }
    pub fn report_dir(&self) -> PathBuf {
        self.out().join("report")
    }

    /// The grid's steps (after the preparation steps ran: every domain's files must exist).
    pub fn steps(&self) -> Result<Vec<Step>> {
        for d in &self.domains {
            for (what, p) in [
                ("train", &d.train),
                ("test", &d.test),
                ("dev", &d.dev().to_path_buf()),
            ] {
                if !p.is_file() {
                    return Err(Error::file(
                        p,
                        format!("domain '{}' {what}: no such file", d.name),
                    ));
                }
            }
        }
        let g = &self.settings;
        let model = show(&g.model);
        let seed = g.seed.to_string();
        let batch = g.batch_size.to_string();
        let mut steps = Vec::new();
        let overlap = self.out().join("overlap");
        let mut a = Args::default()
            .flag("tokenizer", &model)
            .flag("out", &show(&overlap));
        for d in &self.domains {
            a = a.positional(format!("{}={}", d.name, show(&d.train)));
        }
        steps.push(a.step("overlap", "domain-overlap", vec![self.overlap_json()]));
        for t in &self.domains {
            if self.samples(t)? {
                let dest = self.target_pairs(t)?;
                let a = Args::default()
                    .positional(show(&t.train))
                    .positional(show(&dest))
                    .flag("columns", "sentence1,sentence2")
                    .flag("sample", &g.target_pairs.to_string())
                    .flag("seed", &seed);
                steps.push(a.step(&format!("sample-{}", t.name), "convert", vec![dest]));
            }
        }
        for s in &self.domains {
            let ce = self.cross_encoder(s);
            let a = Args::default()
                .flag("model", &model)
                .flag("train", &show(&s.train))
                .flag("dev", &show(s.dev()))
                .switch("both-orders")
                .flag("epochs", "1")
                .flag("batch-size", &batch)
                .flag("lr", &s.lr.to_string())
                .flag("warmup", &s.warmup.to_string())
                .flag("seed", &seed)
                .flag("out", &show(&ce));
            steps.push(a.step(
                &format!("cross-encoder-{}", s.name),
                "train-cross-encoder",
                vec![ce.join("model.safetensors"), ce.join("train_log.csv")],
            ));
            steps.push(biencoder(
                &format!("gold-{}", s.name),
                &model,
                &s.train,
                &self.gold_biencoder(s),
                &batch,
                &seed,
            ));
            for t in &self.domains {
                for augmented in [false, true] {
                    let silver = self.silver_pairs(s, t, augmented);
                    let mut a = Args::default()
                        .flag("cross-encoder", &show(&ce))
                        .flag("input", &show(&self.target_pairs(t)?))
                        .flag("columns", "sentence1,sentence2")
                        .switch("unlabeled")
                        .flag("seed", &seed)
                        .flag("out", &show(&silver));
                    a = if augmented {
                        a.flag("sample", "random")
                            .flag("top-k", &g.top_k.to_string())
                    } else {
                        a.flag("sample", "none")
                    };
                    let name = cell_name(s, t, augmented);
                    steps.push(a.step(&format!("label-{name}"), "augment", vec![silver.clone()]));
                    steps.push(biencoder(
                        &name,
                        &model,
                        &silver,
                        &self.silver_biencoder(s, t, augmented),
                        &batch,
                        &seed,
                    ));
                }
            }
        }
        for t in &self.domains {
            let dir = self.eval_dir(t);
            let mut a = Args::default().flag("model", &model);
            for m in self.models_on(t) {
                a = a.flag("model", &show(&m));
            }
            let a = a
                .flag(t.task.flag(), &format!("{}={}", t.name, show(&t.test)))
                .flag("out", &show(&dir));
            steps.push(a.step(
                &format!("evaluate-{}", t.name),
                "evaluate",
                vec![dir.join("results.json")],
            ));
        }
        Ok(steps)
    }

    /// The trained models scored on target `t`: every gold bi-encoder, then each source's (i)
    /// and (ii) bi-encoders for `t`.
    fn models_on(&self, t: &Domain) -> Vec<PathBuf> {
        let mut m: Vec<PathBuf> = self
            .domains
            .iter()
            .map(|s| self.gold_biencoder(s))
            .collect();
        for s in &self.domains {
            m.push(self.silver_biencoder(s, t, false));
            m.push(self.silver_biencoder(s, t, true));
        }
        m
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

/// A bi-encoder from `model` with the cosine loss, 1 epoch, on labelled pairs.
fn biencoder(name: &str, model: &str, train: &Path, out: &Path, batch: &str, seed: &str) -> Step {
    Args::default()
        .flag("init", model)
        .flag("train", &show(train))
        .flag("loss", "cosine")
        .flag("epochs", "1")
        .flag("batch-size", batch)
        .flag("seed", seed)
        .flag("out", &show(out))
        .step(
            &format!("bi-encoder-{name}"),
            "train-biencoder",
            vec![out.join("model.safetensors"), out.join("train_log.csv")],
        )
}

fn show(p: &Path) -> String {
    p.display().to_string()
}

/// A subcommand's argv, built flag by flag.
#[derive(Default)]
struct Args(Vec<String>);

impl Args {
    fn flag(mut self, name: &str, value: &str) -> Args {
        self.0.push(format!("--{name}"));
        self.0.push(value.to_string());
        self
    }
    fn switch(mut self, name: &str) -> Args {
        self.0.push(format!("--{name}"));
        self
    }
    fn positional(mut self, value: String) -> Args {
        self.0.push(value);
        self
    }
    /// The step; its --out (as a recipe's) is where it writes, never one of its inputs.
    fn step(self, name: &str, command: &str, outputs: Vec<PathBuf>) -> Step {
        let out = self
            .0
            .iter()
            .position(|a| a == "--out")
            .and_then(|i| self.0.get(i + 1))
            .map(PathBuf::from);
        Step {
            name: name.to_string(),
            command: command.to_string(),
            args: self.0,
            outputs,
            out,
        }
    }
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
