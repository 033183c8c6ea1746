//! Leave one collection out (issue 55): a choice rule is a function of one collection's dev
//! figures (`choose`'s report.json) to a method; it is set on the other development collections
//! and scored on the one left out, whose test half (read once by its own recipe run, every final
//! model's per-query scores in report/test/) is the rule's validation there. A rule is set by the
//! least worst-case risk (its harm one se below the test gain), then harm, over the collections
//! it is set on, then the highest mean gain, then the simplest (fewer methods it can pick,
//! resting on the stock model, list order). The collections users bring are the test; these are
//! development. A rule: loco_rule.rs; each collection's test gains: loco_gains.rs; the study's
//! report: loco_report.rs; the rules it ships, applied by `choose --rule-from`: loco_shipped.rs.
use super::loco_gains::{Collection, TestGain};
use crate::error::{Error, Result};
use serde::Serialize;

pub use super::loco_gains::{gain_of, read_all, test_gains, STOCK};
pub use super::loco_rule::{Among, Evidence, Rule, MIN_DEV_QUERIES};

/// A harm smaller than this is no harm (the targets' tolerance: no worse than stock - 0.005).
pub const TOLERANCE: f64 = 0.005;

/// Per method: (collection, dev gain, test gain) on each collection where both exist.
pub type Agreement = Vec<(String, Vec<(String, f64, f64)>)>;

/// How many of (collection, dev gain, test gain) had dev and test gains of one sign.
pub(super) fn same_sign(rows: &[(String, f64, f64)]) -> usize {
    rows.iter().filter(|r| (r.1 > 0.0) == (r.2 > 0.0)).count()
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
    /// How far below the stock model the pick's test gain falls one standard error (over test
    /// queries) below its mean: the harm a rule is selected by (issue 82). A point harm of zero
    /// on 40 test queries, whose gain has an se of 0.01-0.02, says little: the zero-label rule
    /// set on three collections by point harm picked pw, harmless on all three, and pw lost 0.007
    /// on the fourth (MED).
    pub risk: f64,
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
        risk: (pick.se - pick.gain).max(0.0),
        within_target: pick.gain >= -TOLERANCE && !below_plain,
        ahead: pick.gain > 0.0 && pick.gain > 2.0 * pick.sd.unwrap_or(0.0),
        pick,
        best,
    })
}

/// The rule with the least worst-case risk over `cs` (its pick's harm one se below its test gain),
/// then the least worst-case harm, then the highest mean gain; where rules tie on all three, the
/// one that can pick fewer methods, then one that rests on the stock model (then the first
/// listed): with its outcomes there.
pub fn select<'a>(
    rules: &'a [Rule],
    cs: &[&Collection],
    allowed: &[String],
    labels: &[String],
) -> Result<(&'a Rule, Vec<Outcome>)> {
    let mut best: Option<(&Rule, Vec<Outcome>, [f64; 3])> = None;
    for r in rules {
        let o = (cs.iter())
            .map(|c| outcome(r, c, allowed, labels))
            .collect::<Result<Vec<_>>>()?;
        let risk = o.iter().map(|x| x.risk).fold(0.0, f64::max);
        let worst = o.iter().map(|x| x.harm).fold(0.0, f64::max);
        let mean = o.iter().map(|x| x.pick.gain).sum::<f64>() / o.len() as f64;
        // lower is better in each: risk, harm, then the mean gain negated
        let key = [risk, worst, -mean];
        let better = best.as_ref().is_none_or(|b| {
            const EPS: f64 = 1e-12;
            if let Some((x, y)) = key.iter().zip(&b.2).find(|(x, y)| (*x - *y).abs() > EPS) {
                return x < y;
            }
            let (n, nb) = (
                r.can_pick(allowed, labels).len(),
                b.0.can_pick(allowed, labels).len(),
            );
            n < nb || (n == nb && r.rests_on_stock() && !b.0.rests_on_stock())
        });
        if better {
            best = Some((r, o, key));
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
    /// x2; the mean alone, or also every fold or the bootstrap's bound; among every method or
    /// the label methods only; falling back to the stock model or to any fixed method). The
    /// candidate set is the rotation's to choose (issue 82): a label-free method is picked with
    /// labels only by a rule validated with it among the candidates.
    pub fn with_labels(stock: &str, methods: &[String]) -> Setting {
        let mut allowed = vec![stock.to_string()];
        allowed.extend(methods.iter().cloned());
        let mut rules: Vec<Rule> = (allowed.iter())
            .map(|m| Rule::Always { method: m.clone() })
            .collect();
        for among in [Among::All, Among::Labels] {
            for evidence in [Evidence::Mean, Evidence::Folds, Evidence::Bootstrap] {
                for fallback in &allowed {
                    for k in [2.0, 1.0, 0.0] {
                        for correction in [1.0, 1.5, 2.0] {
                            rules.push(Rule::Dev {
                                k,
                                correction,
                                fallback: fallback.clone(),
                                evidence,
                                among,
                            });
                        }
                    }
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
        let mut groups: Vec<&str> = cs.iter().map(Collection::group).collect();
        groups.sort_unstable();
        groups.dedup();
        if groups.len() < 3 {
            return Err(Error::msg(
                "leave one collection out needs at least 3 collections (a rule is set on 2 or more)",
            ));
        }
        if let Some(c) =
            (cs.iter().enumerate()).find(|(i, c)| cs[..*i].iter().any(|o| o.name == c.name))
        {
            return Err(Error::msg(format!(
                "collection {} is named twice: name a collection's splits NAME/SPLIT (cranfield/s0, \
                 cranfield/s1)",
                c.1.name
            )));
        }
        let mut out = Vec::new();
        for s in settings {
            let mut rotations = Vec::new();
            // every split of the collection left out leaves with it
            for left in cs {
                let others: Vec<&Collection> =
                    cs.iter().filter(|c| c.group() != left.group()).collect();
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
