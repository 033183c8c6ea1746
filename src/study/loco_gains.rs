//! A development collection's figures for leave-one-collection-out (loco.rs): its dev choice
//! (`choose`'s report.json) and every final model's test gain over the stock model, paired by
//! test query and averaged over seeds.
use super::choice::Choice;
use super::over_seeds::{mean_sd, method_of, read_per_query};
use crate::error::{Error, Result};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// The starting model as the rules name it: a shipped rule must apply to a run from any model
/// (bert-base, SciBERT), so it never names the model the development runs started from.
pub const STOCK: &str = "stock";

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
    /// The collection a run is a split of: its name up to a `/` (`cranfield/s1`: Cranfield's
    /// split with seed 1). A rotation leaves every split of a collection out together, so that no
    /// rule is set on the queries or documents it is scored on (issue 82).
    pub fn group(&self) -> &str {
        self.name.split_once('/').map_or(&self.name, |g| g.0)
    }

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

/// The collections as NAME=DIR pairs, each read.
pub fn read_all(named: &[(String, PathBuf)], metric: &str) -> Result<Vec<Collection>> {
    named
        .iter()
        .map(|(n, d)| Collection::read(n, d, metric))
        .collect()
}
