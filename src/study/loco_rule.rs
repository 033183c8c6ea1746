//! A choice rule of the leave-one-collection-out study (loco.rs): what it picks from one
//! collection's dev figures (`choose`'s report.json), a fixed method or the best dev gain that
//! passes its tests.
use super::choice::Choice;
use super::dev_evidence::QueryEvidence;
use super::loco_gains::STOCK;
use serde::Serialize;

/// The dev queries below which the dev figures cannot decide: a rule falls back to its default.
pub const MIN_DEV_QUERIES: usize = 20;

/// What a dev gain must also show, beside exceeding k standard errors and k seed sds, before a
/// rule may pick it (issue 82: a mean over few, heavy-tailed queries looked safer than it was).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Evidence {
    /// Nothing more (the rules before issue 82; a rule file without the field).
    #[default]
    Mean,
    /// Every fold of the train queries gains (dev_evidence.rs).
    Folds,
    /// A bootstrap over dev queries puts the mean gain's lower 5% bound above zero.
    Bootstrap,
}

impl Evidence {
    /// Whether a dev row's per-query evidence shows what this asks for.
    fn shown(self, e: &QueryEvidence) -> bool {
        match self {
            Evidence::Mean => true,
            Evidence::Folds => e.every_fold_ahead(),
            Evidence::Bootstrap => e.bootstrap_low.is_some_and(|l| l > 0.0),
        }
    }
}

/// The methods a dev rule may pick from (beside its fallback).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Among {
    /// Every candidate (a rule file without the field).
    #[default]
    All,
    /// The label methods only: a label-free method the zero-label setting found unsafe is then
    /// never picked for its dev gain alone (issue 82: p, chosen with labels, lost 0.026).
    Labels,
}

impl Among {
    /// Whether `method` is a candidate (`labels`: the label methods).
    fn admits(self, method: &str, labels: &[String]) -> bool {
        self == Among::All || labels.iter().any(|l| l == method)
    }
}

/// A choice rule: what it picks from one collection's dev figures.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case", tag = "rule", deny_unknown_fields)]
pub enum Rule {
    /// Always this method (the stock model's name: keep it), whatever dev says.
    Always { method: String },
    /// The highest dev gain among candidates (`among`) whose gain exceeds `k` times its standard
    /// error over dev queries and `k` times its sd over seeds, and shows `evidence`; `fallback`
    /// where none does, or where fewer than MIN_DEV_QUERIES dev queries exist. A label method's
    /// gain is multiplied by `correction` first, its noise not: its fold models saw a part of
    /// the labels its final model sees, and dev under-predicted its test gain (Cranfield +0.011
    /// against +0.031).
    Dev {
        k: f64,
        correction: f64,
        fallback: String,
        #[serde(default)]
        evidence: Evidence,
        #[serde(default)]
        among: Among,
    },
}

impl Rule {
    pub fn name(&self) -> String {
        match self {
            Rule::Always { method } => format!("always {method}"),
            Rule::Dev {
                k,
                correction,
                fallback,
                evidence,
                among,
            } => {
                let c = if *correction == 1.0 {
                    String::new()
                } else {
                    format!(", label gains x{correction}")
                };
                let e = match evidence {
                    Evidence::Mean => "",
                    Evidence::Folds => " and on every fold",
                    Evidence::Bootstrap => " and its bootstrap 5% bound above 0",
                };
                let a = match among {
                    Among::All => "",
                    Among::Labels => " among the label methods",
                };
                format!("dev beyond {k} se{e}{a}{c}, else {fallback}")
            }
        }
    }

    /// The methods of `allowed` this rule may pick (`labels`: the label methods).
    pub fn can_pick<'a>(&'a self, allowed: &'a [String], labels: &[String]) -> Vec<&'a str> {
        match self {
            Rule::Always { method } => vec![method.as_str()],
            Rule::Dev {
                fallback, among, ..
            } => {
                let mut m: Vec<&str> = (allowed.iter())
                    .filter(|m| among.admits(m, labels))
                    .map(String::as_str)
                    .collect();
                if !m.contains(&fallback.as_str()) {
                    m.push(fallback);
                }
                m
            }
        }
    }

    /// The method this rule picks from `dev` (one collection's dev figures), among `allowed`;
    /// `labels` names the methods whose dev models were trained on folds (the label methods).
    pub fn pick(&self, dev: &Choice, allowed: &[String], labels: &[String]) -> String {
        match self {
            Rule::Always { method } => method.clone(),
            Rule::Dev {
                k,
                correction,
                fallback,
                evidence,
                among,
            } => {
                if dev.dev_queries() < MIN_DEV_QUERIES {
                    return fallback.clone();
                }
                let mut best: Option<(f64, &str)> = None;
                for m in allowed.iter().filter(|m| among.admits(m, labels)) {
                    let Some(r) = dev.candidates.iter().find(|r| &r.method == m) else {
                        continue;
                    };
                    let f = if labels.contains(m) { *correction } else { 1.0 };
                    let g = r.gain * f;
                    let beyond = r.gain_se.is_some_and(|se| g > k * se)
                        && r.seed_sd.is_none_or(|sd| g > k * sd)
                        && g > 0.0
                        && evidence.shown(&r.evidence);
                    if beyond && best.is_none_or(|b| g > b.0) {
                        best = Some((g, m));
                    }
                }
                best.map_or(fallback.clone(), |b| b.1.to_string())
            }
        }
    }

    /// Whether the rule's answer where dev cannot decide is the stock model.
    pub(super) fn rests_on_stock(&self) -> bool {
        match self {
            Rule::Always { method } => method == STOCK,
            Rule::Dev { fallback, .. } => fallback == STOCK,
        }
    }
}
