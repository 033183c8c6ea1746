//! Leave one collection out (issue 55): a choice rule is a function of one collection's dev
//! figures (`choose`'s report.json) to a method; it is set on the other development collections
//! and scored on the one left out, whose test half (read once by its own recipe run, every final
//! model's per-query scores in report/test/) is the rule's validation there. A rule is set by the
//! least worst-case harm over the collections it is set on, then the highest mean gain, then the
//! simplest (list order). The collections users bring are the test; these are development.
use super::choice::Choice;
use super::over_seeds::{mean_sd, method_of, read_per_query};
use crate::error::{Error, Result};
use serde::Serialize;
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// The dev queries below which the dev figures cannot decide: a rule falls back to its default.
pub const MIN_DEV_QUERIES: usize = 20;

/// The starting model as the rules name it: a shipped rule must apply to a run from any model
/// (bert-base, SciBERT), so it never names the model the development runs started from.
pub const STOCK: &str = "stock";

/// A harm smaller than this is no harm (the targets' tolerance: no worse than stock - 0.005).
pub const TOLERANCE: f64 = 0.005;

/// One method's test gain over the stock model on one collection.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct TestGain {
    pub method: String,
    pub seeds: usize,
    /// Mean over seeds of the seed's test score.
    pub score: f64,
    /// Paired over test queries: each query's score (mean over seeds) less the stock model's.
    pub gain: f64,
    /// Standard error of the gain over test queries.
    pub se: f64,
    /// Sd over seeds of each seed's gain.
    pub sd: Option<f64>,
    /// Test queries the method (seeds' mean) scores above / below the stock model.
    pub wins: usize,
    pub losses: usize,
    pub queries: usize,
}

/// Per method: (collection, dev gain, test gain) on each collection where both exist.
pub type Agreement = Vec<(String, Vec<(String, f64, f64)>)>;

/// How many of (collection, dev gain, test gain) had dev and test gains of one sign.
fn same_sign(rows: &[(String, f64, f64)]) -> usize {
    rows.iter().filter(|r| (r.1 > 0.0) == (r.2 > 0.0)).count()
}

/// One development collection: its dev choice figures and every final model's test gain.
#[derive(Clone, Debug)]
pub struct Collection {
    pub name: String,
    pub dev: Choice,
    /// Every method but the stock model (whose gain is 0 by definition).
    pub test: Vec<TestGain>,
    pub stock_score: f64,
}

impl Collection {
    /// `dir`: a retrieval-adaptation run's out folder (report/report.json, report/test/).
    pub fn read(name: &str, dir: &Path, metric: &str) -> Result<Collection> {
        let report = dir.join("report").join("report.json");
        let text = std::fs::read_to_string(&report).map_err(|e| Error::file(&report, e))?;
        #[derive(serde::Deserialize)]
        struct Report {
            dev: Choice,
        }
        let r: Report = serde_json::from_str(&text).map_err(|e| Error::file(&report, e))?;
        if r.dev.metric != metric {
            return Err(Error::file(
                &report,
                format!("chosen by {}, not {metric}", r.dev.metric),
            ));
        }
        let per_query = dir.join("report").join("test").join("results.csv");
        let rows = read_per_query(&[per_query], metric)?;
        let (stock_score, test) = test_gains(&rows, &r.dev.baseline.method)
            .map_err(|e| Error::file(&dir.join("report").join("test"), e))?;
        Ok(Collection {
            name: name.to_string(),
            dev: r.dev,
            test,
            stock_score,
        })
    }

    /// The test gain of `method` (the stock model's, STOCK or its name: zero).
    pub fn gain(&self, method: &str) -> Option<TestGain> {
        let base = &self.dev.baseline.method;
        gain_of(
            if method == STOCK { base } else { method },
            base,
            self.stock_score,
            &self.test,
        )
    }
}

/// `method`'s test gain among `gains`, the stock model's (zero) where it is `stock`.
pub fn gain_of(
    method: &str,
    stock: &str,
    stock_score: f64,
    gains: &[TestGain],
) -> Option<TestGain> {
    if method == stock {
        return Some(TestGain {
            method: method.to_string(),
            seeds: 1,
            score: stock_score,
            gain: 0.0,
            se: 0.0,
            sd: None,
            wins: 0,
            losses: 0,
            queries: 0,
        });
    }
    gains.iter().find(|t| t.method == method).cloned()
}

/// (stock model's mean score, each other method's gain) from per-query test rows.
pub fn test_gains(
    rows: &[(String, String, String, f64)],
    stock: &str,
) -> Result<(f64, Vec<TestGain>)> {
    let base: Vec<(&str, f64)> = (rows.iter())
        .filter(|r| method_of(&r.0) == stock)
        .map(|r| (r.2.as_str(), r.3))
        .collect();
    if base.is_empty() {
        return Err(Error::msg(format!(
            "no test score of the stock model {stock}"
        )));
    }
    let stock_score = base.iter().map(|b| b.1).sum::<f64>() / base.len() as f64;
    let mut methods: Vec<String> = Vec::new();
    for r in rows {
        let m = method_of(&r.0);
        if m != stock && !methods.contains(&m) {
            methods.push(m);
        }
    }
    let mut out = Vec::new();
    for m in methods {
        let mine: Vec<&(String, String, String, f64)> =
            rows.iter().filter(|r| method_of(&r.0) == m).collect();
        let mut models: Vec<&str> = mine.iter().map(|r| r.0.as_str()).collect();
        models.sort();
        models.dedup();
        let mut per_query = Vec::with_capacity(base.len());
        for (q, b) in &base {
            let v: Vec<f64> = mine.iter().filter(|r| r.2 == *q).map(|r| r.3).collect();
            if v.len() != models.len() {
                return Err(Error::msg(format!(
                    "query {q}: {} of {m}'s {} models scored it",
                    v.len(),
                    models.len()
                )));
            }
            per_query.push(v.iter().sum::<f64>() / v.len() as f64 - b);
        }
        let seed_gains: Vec<f64> = models
            .iter()
            .map(|model| {
                let v: Vec<f64> = mine.iter().filter(|r| r.0 == *model).map(|r| r.3).collect();
                v.iter().sum::<f64>() / v.len() as f64 - stock_score
            })
            .collect();
        let (gain, sd) = mean_sd(&per_query);
        let (seed_gain, seed_sd) = mean_sd(&seed_gains);
        let n = per_query.len();
        out.push(TestGain {
            method: m,
            seeds: models.len(),
            score: stock_score + seed_gain,
            gain,
            se: sd.unwrap_or(0.0) / (n as f64).sqrt(),
            sd: seed_sd,
            wins: per_query.iter().filter(|g| **g > 0.0).count(),
            losses: per_query.iter().filter(|g| **g < 0.0).count(),
            queries: n,
        });
    }
    Ok((stock_score, out))
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
    /// The issue's targets on this collection: no worse than stock - TOLERANCE; with labels,
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

    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let yes = |b: bool| if b { "yes" } else { "no" };
        let g = |t: &TestGain| match t.sd {
            Some(sd) => format!("{:+.4} (se {:.4}, sd {:.4})", t.gain, t.se, sd),
            None => format!("{:+.4} (se {:.4})", t.gain, t.se),
        };
        for st in &self.settings {
            let _ = write!(
                s,
                "### {}: each collection left out in turn\n\n| left out | rule set on the \
                 others | its pick | test gain over stock | best method: gain | regret | harm | \
                 within target | ahead beyond 2 sd |\n|---|---|---|---|---|---|---|---|---|\n",
                st.setting
            );
            for r in &st.rotations {
                let o = &r.outcome;
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {} | {}: {:+.4} | {:.4} | {:.4} | {} | {} |",
                    r.left_out,
                    r.rule.name(),
                    o.pick.method,
                    g(&o.pick),
                    o.best.method,
                    o.best.gain,
                    o.regret,
                    o.harm,
                    yes(o.within_target),
                    yes(o.ahead)
                );
            }
            let _ = write!(
                s,
                "\nShipped ({}, selected over all {} collections): {}\n\n| collection | pick | \
                 test gain | wins / losses over test queries | harm |\n|---|---|---|---|---|\n",
                st.setting,
                self.collections.len(),
                st.shipped.name()
            );
            for o in &st.shipped_outcomes {
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {} / {} of {} | {:.4} |",
                    o.collection,
                    o.pick.method,
                    g(&o.pick),
                    o.pick.wins,
                    o.pick.losses,
                    o.pick.queries,
                    o.harm
                );
            }
            s.push('\n');
        }
        s.push_str(
            "### Dev and test: gain on dev (the recipe's dev figures) against gain on test\n\n\
             | method | per collection: dev / test | same sign |\n|---|---|---|\n",
        );
        for (m, rows) in &self.agreement {
            let cells: Vec<String> = (rows.iter())
                .map(|(c, d, t)| format!("{c} {d:+.4} / {t:+.4}"))
                .collect();
            let agree = same_sign(rows);
            let _ = writeln!(
                s,
                "| {m} | {} | {agree} of {} |",
                cells.join("; "),
                rows.len()
            );
        }
        s
    }
}

/// The rules a study shipped (its loco.json), as `choose --rule-from` applies them.
#[derive(Clone, Debug, serde::Deserialize)]
pub struct Shipped {
    pub metric: String,
    pub collections: Vec<String>,
    pub labels: Vec<String>,
    settings: Vec<ShippedSetting>,
    agreement: Agreement,
}

#[derive(Clone, Debug, serde::Deserialize)]
struct ShippedSetting {
    setting: String,
    shipped: Rule,
}

impl Shipped {
    pub fn read(path: &Path) -> Result<Shipped> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::file(path, e))?;
        let s: Shipped = serde_json::from_str(&text).map_err(|e| Error::file(path, e))?;
        for name in ["zero labels", "with labels"] {
            if !s.settings.iter().any(|x| x.setting == name) {
                return Err(Error::file(path, format!("no shipped rule for '{name}'")));
            }
        }
        Ok(s)
    }

    fn rule(&self, setting: &str) -> &Rule {
        &(self.settings.iter().find(|x| x.setting == setting))
            .expect("checked on reading")
            .shipped
    }

    /// Apply the rule with labels to `dev` (its `chosen` and `why`); the zero-label pick. A rule
    /// set on another metric, or a pick this run did not train, is refused: it would be applied
    /// to figures it was not made for.
    pub fn apply(&self, dev: &mut Choice) -> Result<String> {
        if dev.metric != self.metric {
            return Err(Error::msg(format!(
                "--rule-from: the rules were set on {}, this choice is by {}",
                self.metric, dev.metric
            )));
        }
        let mut allowed = vec![STOCK.to_string()];
        allowed.extend(dev.candidates.iter().map(|r| r.method.clone()));
        // STOCK is this run's starting model, whatever its name
        let base = dev.baseline.method.clone();
        let trained = |m: String| {
            if m == STOCK {
                Ok(base.clone())
            } else if allowed.contains(&m) {
                Ok(m)
            } else {
                Err(Error::msg(format!(
                    "--rule-from: the shipped rule picks {m}, which this run has no dev figures \
                     of (its candidates: {}); run it, or name rules set on these candidates",
                    allowed.join(", ")
                )))
            }
        };
        let rule = self.rule("with labels");
        dev.chosen = trained(rule.pick(dev, &allowed, &self.labels))?;
        let n = dev.dev_queries();
        dev.why = match rule {
            Rule::Dev { fallback, .. } if n < MIN_DEV_QUERIES => format!(
                "dev cannot decide here: {n} judged train queries, fewer than {MIN_DEV_QUERIES}; \
                 the rule's default is taken: {}",
                if fallback == STOCK {
                    format!("the stock model ({base})")
                } else {
                    fallback.clone()
                }
            ),
            _ => format!(
                "the rule set on the development collections ({}): {}",
                self.collections.join(", "),
                rule.name()
            ),
        };
        trained(self.rule("zero labels").pick(dev, &allowed, &self.labels))
    }

    /// In how many development collections a method's dev and test gains had the same sign.
    pub fn agreement(&self, method: &str) -> Option<(usize, usize)> {
        let rows = &self.agreement.iter().find(|a| a.0 == method)?.1;
        Some((same_sign(rows), rows.len()))
    }
}

/// The collections as NAME=DIR pairs, each read.
pub fn read_all(named: &[(String, PathBuf)], metric: &str) -> Result<Vec<Collection>> {
    named
        .iter()
        .map(|(n, d)| Collection::read(n, d, metric))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::choice::DevRow;

    fn dev_row(method: &str, gain: f64, se: f64, queries: usize) -> DevRow {
        DevRow {
            method: method.into(),
            seeds: vec![("1".into(), 0.5 + gain, gain)],
            mean: 0.5 + gain,
            sd: None,
            gain,
            queries,
            gain_se: Some(se),
            seed_sd: None,
            counts: gain > 2.0 * se,
            wall_seconds: None,
        }
    }

    /// A collection whose dev gains are `dev` and test gains `test` (method, gain).
    fn collection(
        name: &str,
        queries: usize,
        dev: &[(&str, f64)],
        test: &[(&str, f64)],
    ) -> Collection {
        let base = DevRow {
            method: "stock".into(),
            ..dev_row("stock", 0.0, 0.0, 0)
        };
        Collection {
            name: name.into(),
            dev: Choice {
                metric: "ndcg".into(),
                baseline: base,
                candidates: dev
                    .iter()
                    .map(|(m, g)| dev_row(m, *g, 0.01, queries))
                    .collect(),
                chosen: "stock".into(),
                why: String::new(),
            },
            test: (test.iter())
                .map(|(m, g)| TestGain {
                    method: m.to_string(),
                    seeds: 3,
                    score: 0.5 + g,
                    gain: *g,
                    se: 0.01,
                    sd: Some(0.002),
                    wins: 0,
                    losses: 0,
                    queries: 40,
                })
                .collect(),
            stock_score: 0.5,
        }
    }

    /// Per-query test rows: each query's gain pairs it with the stock model's score on that
    /// query, seeds averaged; the seeds' sd is over each seed's mean.
    #[test]
    fn test_gains_are_paired_by_query_and_averaged_over_seeds() {
        let row = |m: &str, q: &str, v: f64| (m.to_string(), "t".to_string(), q.to_string(), v);
        let rows = vec![
            row("model/stock", "q1", 0.5),
            row("model/stock", "q2", 0.3),
            row("o/b-s1", "q1", 0.6),
            row("o/b-s1", "q2", 0.3),
            row("o/b-s2", "q1", 0.4),
            row("o/b-s2", "q2", 0.5),
        ];
        let (stock, t) = test_gains(&rows, "stock").unwrap();
        assert!((stock - 0.4).abs() < 1e-12);
        let b = &t[0];
        assert_eq!((b.method.as_str(), b.seeds, b.queries), ("b", 2, 2));
        // q1: mean 0.5 - 0.5 = 0; q2: mean 0.4 - 0.3 = 0.1
        assert!((b.gain - 0.05).abs() < 1e-12, "{b:?}");
        assert_eq!((b.wins, b.losses), (1, 0));
        // seed gains 0.05 and 0.05: no spread
        assert!(b.sd.unwrap().abs() < 1e-12, "{b:?}");
        let missing: Vec<_> = rows
            .into_iter()
            .filter(|r| !(r.0 == "o/b-s2" && r.2 == "q2"))
            .collect();
        assert!(test_gains(&missing, "stock")
            .unwrap_err()
            .to_string()
            .contains("query q2"));
    }

    /// Rules: a dev rule takes the best dev gain beyond k se (label gains corrected), falls back
    /// below MIN_DEV_QUERIES; selection takes the least worst-case harm, then the mean gain;
    /// each collection left out is scored by the rule set on the others.
    #[test]
    fn rules_are_set_on_the_others_and_scored_on_the_one_left_out() {
        let labels = vec!["b".to_string()];
        let allowed = vec!["stock".to_string(), "pw".to_string(), "b".to_string()];
        // dev says b (+0.03 beyond 2 se) on A and B, where b gains on test; on C dev says b but
        // b harms on test; D has 12 dev queries: a dev rule falls back there
        let a = collection(
            "A",
            40,
            &[("pw", 0.001), ("b", 0.03)],
            &[("pw", 0.004), ("b", 0.05)],
        );
        let b = collection(
            "B",
            40,
            &[("pw", 0.002), ("b", 0.03)],
            &[("pw", 0.003), ("b", 0.04)],
        );
        let c = collection(
            "C",
            40,
            &[("pw", 0.0), ("b", 0.03)],
            &[("pw", 0.002), ("b", -0.04)],
        );
        let d = collection(
            "D",
            12,
            &[("pw", 0.0), ("b", 0.05)],
            &[("pw", 0.001), ("b", 0.02)],
        );
        let dev = |k, correction, fallback: &str| Rule::Dev {
            k,
            correction,
            fallback: fallback.into(),
        };
        assert_eq!(dev(2.0, 1.0, "stock").pick(&a.dev, &allowed, &labels), "b");
        assert_eq!(dev(2.0, 1.0, "pw").pick(&d.dev, &allowed, &labels), "pw");
        // 0.015 is below 2 se (0.02) unless corrected x2
        let weak = collection("W", 40, &[("b", 0.015)], &[("b", 0.01)]);
        assert_eq!(
            dev(2.0, 1.0, "stock").pick(&weak.dev, &allowed, &labels),
            "stock"
        );
        assert_eq!(
            dev(2.0, 2.0, "stock").pick(&weak.dev, &allowed, &labels),
            "b"
        );

        let s = Setting::with_labels("stock", &["pw".to_string(), "b".to_string()]);
        let cs = [a, b, c, d];
        let loco = Loco::rotate(&cs, &[s], &labels).unwrap();
        let r = &loco.settings[0].rotations;
        // set on B, C, D: b harms C, so the safest rule with the best mean is always pw
        assert_eq!(
            (r[0].left_out.as_str(), r[0].outcome.pick.method.as_str()),
            ("A", "pw")
        );
        assert!((r[0].outcome.regret - 0.046).abs() < 1e-9, "{:?}", r[0]);
        // no harm, but b gained beyond twice its sd there and pw fell more than b's sd short
        assert!(r[0].outcome.harm == 0.0 && !r[0].outcome.within_target);
        // set on A, B, D (no harm anywhere from b): always b has the best mean; on C it harms
        assert_eq!(r[2].rule, Rule::Always { method: "b".into() });
        assert!((r[2].outcome.harm - 0.04).abs() < 1e-9);
        assert!(!r[2].outcome.within_target && !r[2].outcome.ahead);
        // D: set on A, B, C; its pick within target wherever it is b itself or stock-safe
        assert_eq!(r[3].outcome.within_target, r[3].outcome.pick.method == "b");
        assert_eq!(
            loco.settings[0].shipped,
            Rule::Always {
                method: "pw".into()
            }
        );
        let md = loco.markdown();
        assert!(md.contains("| C | always b | b | -0.0400"), "{md}");
        assert!(md.contains("| b | A +0.0300 / +0.0500;"), "{md}");
        assert!(Loco::rotate(&cs[..2], &[], &labels).is_err());
    }

    /// A shipped rule file: the rule with labels chooses (the default below 20 dev queries,
    /// said so), the zero-label rule names the label-free pick, agreement counts signs.
    #[test]
    fn shipped_rules_choose_and_say_when_dev_cannot_decide() {
        let json = r#"{"metric": "ndcg", "collections": ["A", "B", "C"], "labels": ["b"],
            "settings": [
              {"setting": "zero labels", "shipped": {"rule": "always", "method": "pw"}},
              {"setting": "with labels", "shipped": {"rule": "dev", "k": 2.0, "correction": 1.5, "fallback": "bw"}}],
            "agreement": [["b", [["A", 0.01, 0.02], ["B", 0.01, -0.03], ["C", -0.01, -0.02]]]]}"#;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("loco.json");
        std::fs::write(&path, json).unwrap();
        let shipped = Shipped::read(&path).unwrap();
        assert_eq!(shipped.agreement("b"), Some((2, 3)));
        assert_eq!(shipped.agreement("pb"), None);
        // 40 dev queries: b's +0.015 is short of 2 se (0.02) but x1.5 passes it
        let mut dev = collection("X", 40, &[("pw", 0.001), ("b", 0.015)], &[]).dev;
        assert_eq!(shipped.apply(&mut dev).unwrap(), "pw");
        assert_eq!(dev.chosen, "b", "{}", dev.why);
        assert!(dev.why.contains("A, B, C"), "{}", dev.why);
        let mut few = collection("Y", 14, &[("pw", 0.001), ("b", 0.05), ("bw", 0.0)], &[]).dev;
        shipped.apply(&mut few).unwrap();
        assert_eq!(few.chosen, "bw");
        assert!(
            few.why
                .contains("dev cannot decide here: 14 judged train queries"),
            "{}",
            few.why
        );
        // the default bw is not among this run's candidates; nor is the rules' metric its
        let e = shipped.apply(&mut collection("Z", 14, &[("pw", 0.0)], &[]).dev);
        assert!(e
            .unwrap_err()
            .to_string()
            .contains("picks bw, which this run"));
        let mut other = collection("W", 40, &[("pw", 0.0)], &[]).dev;
        other.metric = "mrr".into();
        let e = shipped.apply(&mut other).unwrap_err().to_string();
        assert!(e.contains("set on ndcg, this choice is by mrr"), "{e}");
        std::fs::write(&path, json.replace("with labels", "with label")).unwrap();
        let e = Shipped::read(&path).unwrap_err().to_string();
        assert!(e.contains("no shipped rule for 'with labels'"), "{e}");
        // rules naming `stock` apply to a run from another model: its own name comes back
        let stocky = json.replace(r#""method": "pw""#, r#""method": "stock""#);
        std::fs::write(
            &path,
            stocky.replace(r#""fallback": "bw""#, r#""fallback": "stock""#),
        )
        .unwrap();
        let shipped = Shipped::read(&path).unwrap();
        let mut bert = collection("V", 14, &[("b", 0.05)], &[]).dev;
        bert.baseline.method = "bert-base-uncased".into();
        assert_eq!(shipped.apply(&mut bert).unwrap(), "bert-base-uncased");
        assert_eq!(bert.chosen, "bert-base-uncased");
        let why = &bert.why;
        assert!(
            why.contains("taken: the stock model (bert-base-uncased)"),
            "{why}"
        );
    }
}
