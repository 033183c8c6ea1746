//! Leave one collection out (issue 55): a choice rule is a function of one collection's dev
//! figures (`choose`'s report.json) to a method; it is set on the other development collections
//! and scored on the one left out, whose test half (read once by its own recipe run, every final
//! model's per-query scores in report/test/) is the rule's validation there. A rule is set by the
//! least worst-case harm over the collections it is set on, then the highest mean gain, then the
//! simplest (list order). The collections users bring are the test; these are development.
//! Each collection's test gains: loco_gains.rs; the study's report: loco_report.rs; the rules it
//! ships, applied by `choose --rule-from`: loco_shipped.rs.
use super::choice::Choice;
use super::loco_gains::{Collection, TestGain};
use crate::error::{Error, Result};
use serde::Serialize;

/// The dev queries below which the dev figures cannot decide: a rule falls back to its default.
pub const MIN_DEV_QUERIES: usize = 20;

pub use super::loco_gains::{gain_of, read_all, test_gains, STOCK};

/// A harm smaller than this is no harm (the targets' tolerance: no worse than stock - 0.005).
pub const TOLERANCE: f64 = 0.005;

/// Per method: (collection, dev gain, test gain) on each collection where both exist.
pub type Agreement = Vec<(String, Vec<(String, f64, f64)>)>;

/// How many of (collection, dev gain, test gain) had dev and test gains of one sign.
pub(super) fn same_sign(rows: &[(String, f64, f64)]) -> usize {
    rows.iter().filter(|r| (r.1 > 0.0) == (r.2 > 0.0)).count()
}

/// A choice rule: what it picks from one collection's dev figures.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case", tag = "rule")]
pub enum Rule {
    /// Always this method (the stock model's name: keep it), whatever dev says.
    Always { method: String },
    /// The highest dev gain among candidates whose gain exceeds `k` times its standard error
    /// over dev queries and `k` times its sd over seeds; `fallback` where none does, or where
    /// fewer than MIN_DEV_QUERIES dev queries exist. A label method's gain is multiplied by
    /// `correction` first, its noise not: its fold models saw a part of the labels its final
    /// model sees, and dev under-predicted its test gain (Cranfield +0.011 against +0.031).
    Dev {
        k: f64,
        correction: f64,
        fallback: String,
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
            } => {
                let c = if *correction == 1.0 {
                    String::new()
                } else {
                    format!(", label gains x{correction}")
                };
                format!("dev beyond {k} se{c}, else {fallback}")
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
            } => {
                if dev.dev_queries() < MIN_DEV_QUERIES {
                    return fallback.clone();
                }
                let mut best: Option<(f64, &str)> = None;
                for m in allowed {
                    let Some(r) = dev.candidates.iter().find(|r| &r.method == m) else {
                        continue;
                    };
                    let f = if labels.contains(m) { *correction } else { 1.0 };
                    let g = r.gain * f;
                    let beyond = r.gain_se.is_some_and(|se| g > k * se)
                        && r.seed_sd.is_none_or(|sd| g > k * sd)
                        && g > 0.0;
                    if beyond && best.is_none_or(|b| g > b.0) {
                        best = Some((g, m));
                    }
                }
                best.map_or(fallback.clone(), |b| b.1.to_string())
            }
        }
    }
}

/// A rule's outcome on one collection.
#[derive(Clone, Debug, Serialize)]
pub struct Outcome {
    pub collection: String,
    pub pick: TestGain,
    /// The best test gain among the allowed methods (the stock model's 0 included).
    pub best: TestGain,
    pub regret: f64,
    /// How far below the stock model the pick fell (0 where it did not).
    pub harm: f64,
    /// The targets on this collection: no worse than stock - TOLERANCE; with labels,
    /// also no worse than the plain label method (the first of the label methods) less one sd
    /// wherever that one gains beyond twice its sd.
    pub within_target: bool,
    /// The pick's gain exceeds twice its sd over seeds (and is positive).
    pub ahead: bool,
}

fn outcome(rule: &Rule, c: &Collection, allowed: &[String], labels: &[String]) -> Result<Outcome> {
    let m = rule.pick(&c.dev, allowed, labels);
    let pick = c
        .gain(&m)
        .ok_or_else(|| Error::msg(format!("{}: no test score of {m}", c.name)))?;
    let best = (allowed.iter())
        .filter_map(|m| c.gain(m))
        .chain(c.gain(STOCK))
        .max_by(|a, b| a.gain.total_cmp(&b.gain))
        .expect("the stock model");
    let labelled = allowed.iter().any(|m| labels.contains(m));
    let plain = labels.first().and_then(|b| c.gain(b));
    let below_plain = labelled
        && plain.as_ref().is_some_and(|b| {
            let sd = b.sd.unwrap_or(0.0);
            b.gain > 2.0 * sd && pick.gain < b.gain - sd
        });
    Ok(Outcome {
        collection: c.name.clone(),
        regret: best.gain - pick.gain,
        harm: (-pick.gain).max(0.0),
        within_target: pick.gain >= -TOLERANCE && !below_plain,
        ahead: pick.gain > 0.0 && pick.gain > 2.0 * pick.sd.unwrap_or(0.0),
        pick,
        best,
    })
}

/// The rule with the least worst-case harm over `cs`, then the highest mean gain (then the
/// first listed); with its outcomes there.
pub fn select<'a>(
    rules: &'a [Rule],
    cs: &[&Collection],
    allowed: &[String],
    labels: &[String],
) -> Result<(&'a Rule, Vec<Outcome>)> {
    let mut best: Option<(&Rule, Vec<Outcome>, f64, f64)> = None;
    for r in rules {
        let o = (cs.iter())
            .map(|c| outcome(r, c, allowed, labels))
            .collect::<Result<Vec<_>>>()?;
        let worst = o.iter().map(|x| x.harm).fold(0.0, f64::max);
        let mean = o.iter().map(|x| x.pick.gain).sum::<f64>() / o.len() as f64;
        let better = best.as_ref().is_none_or(|b| {
            worst < b.2 - 1e-12 || ((worst - b.2).abs() <= 1e-12 && mean > b.3 + 1e-12)
        });
        if better {
            best = Some((r, o, worst, mean));
        }
    }
    best.map(|b| (b.0, b.1))
        .ok_or_else(|| Error::msg("no rule to select"))
}

/// One setting (zero labels, or with labels): its rules and allowed methods.
#[derive(Clone, Debug, Serialize)]
pub struct Setting {
    pub name: String,
    pub allowed: Vec<String>,
    pub rules: Vec<Rule>,
}

impl Setting {
    /// Zero labels: no dev queries, so a fixed method (the stock model or a label-free one).
    pub fn zero_labels(stock: &str, label_free: &[String]) -> Setting {
        let mut allowed = vec![stock.to_string()];
        allowed.extend(label_free.iter().cloned());
        Setting {
            name: "zero labels".into(),
            rules: (allowed.iter())
                .map(|m| Rule::Always { method: m.clone() })
                .collect(),
            allowed,
        }
    }

    /// With labels: a fixed method, or a dev rule (k 0, 1, 2; label gains corrected x1, x1.5,
    /// x2; falling back to the stock model or to any fixed method).
    pub fn with_labels(stock: &str, methods: &[String]) -> Setting {
        let mut allowed = vec![stock.to_string()];
        allowed.extend(methods.iter().cloned());
        let mut rules: Vec<Rule> = (allowed.iter())
            .map(|m| Rule::Always { method: m.clone() })
            .collect();
        for fallback in &allowed {
            for k in [2.0, 1.0, 0.0] {
                for correction in [1.0, 1.5, 2.0] {
                    rules.push(Rule::Dev {
                        k,
                        correction,
                        fallback: fallback.clone(),
                    });
                }
            }
        }
        Setting {
            name: "with labels".into(),
            allowed,
            rules,
        }
    }
}

/// One rotation: the rule set on the others, its outcome on the one left out.
#[derive(Clone, Debug, Serialize)]
pub struct Rotation {
    pub left_out: String,
    pub rule: Rule,
    pub outcome: Outcome,
}

/// A setting's rotations and the rule shipped (selected over all the collections).
#[derive(Clone, Debug, Serialize)]
pub struct SettingReport {
    pub setting: String,
    pub rotations: Vec<Rotation>,
    pub shipped: Rule,
    pub shipped_outcomes: Vec<Outcome>,
}

/// The whole leave-one-collection-out study.
#[derive(Clone, Debug, Serialize)]
pub struct Loco {
    pub metric: String,
    pub collections: Vec<String>,
    /// The methods a user without labels can run, and those trained on labels.
    pub label_free: Vec<String>,
    pub labels: Vec<String>,
    pub settings: Vec<SettingReport>,
    /// Per method: (collection, dev gain, test gain) where both exist.
    pub agreement: Agreement,
}

impl Loco {
    /// The study over `cs`: the zero-label setting among `label_free`, the one with labels among
    /// those and `labels`.
    pub fn run(cs: &[Collection], label_free: &[String], labels: &[String]) -> Result<Loco> {
        let stock = STOCK;
        let all: Vec<String> = label_free.iter().chain(labels).cloned().collect();
        for c in cs {
            for m in &all {
                if c.gain(m).is_none() || !c.dev.candidates.iter().any(|r| &r.method == m) {
                    return Err(Error::msg(format!(
                        "collection {}: {m} lacks dev figures or test scores (a development run \
                         names every candidate in the recipe's `also`); name only the methods it \
                         ran with --label-free and --labels",
                        c.name
                    )));
                }
            }
        }
        let settings = [
            Setting::zero_labels(stock, label_free),
            Setting::with_labels(stock, &all),
        ];
        let mut loco = Self::rotate(cs, &settings, labels)?;
        loco.label_free = label_free.to_vec();
        Ok(loco)
    }

    /// Every setting's rotations over `cs` and its shipped rule.
    pub fn rotate(cs: &[Collection], settings: &[Setting], labels: &[String]) -> Result<Loco> {
        if cs.len() < 3 {
            return Err(Error::msg(
                "leave one collection out needs at least 3 collections (a rule is set on 2 or more)",
            ));
        }
        let mut out = Vec::new();
        for s in settings {
            let mut rotations = Vec::new();
            for (i, left) in cs.iter().enumerate() {
                let others: Vec<&Collection> = (cs.iter().enumerate())
                    .filter(|(j, _)| *j != i)
                    .map(|x| x.1)
                    .collect();
                let (rule, _) = select(&s.rules, &others, &s.allowed, labels)?;
                rotations.push(Rotation {
                    left_out: left.name.clone(),
                    rule: rule.clone(),
                    outcome: outcome(rule, left, &s.allowed, labels)?,
                });
            }
            let all: Vec<&Collection> = cs.iter().collect();
            let (shipped, shipped_outcomes) = select(&s.rules, &all, &s.allowed, labels)?;
            out.push(SettingReport {
                setting: s.name.clone(),
                rotations,
                shipped: shipped.clone(),
                shipped_outcomes,
            });
        }
        let mut agreement: Agreement = Vec::new();
        for c in cs {
            for r in &c.dev.candidates {
                let Some(t) = c.gain(&r.method) else { continue };
                let row = (c.name.clone(), r.gain, t.gain);
                match agreement.iter_mut().find(|a| a.0 == r.method) {
                    Some(a) => a.1.push(row),
                    None => agreement.push((r.method.clone(), vec![row])),
                }
            }
        }
        Ok(Loco {
            metric: cs[0].dev.metric.clone(),
            collections: cs.iter().map(|c| c.name.clone()).collect(),
            label_free: Vec::new(),
            labels: labels.to_vec(),
            settings: out,
            agreement,
        })
    }
}

#[cfg(test)]
#[path = "loco_test.rs"]
mod tests;
