//! Choosing a method on dev queries, never on test (`condenser choose`): every candidate's dev
//! scores from evaluate's results, query by query, each dev query's score (the mean of the seeds'
//! models that may be scored on it) paired with the stock model's on that query. A gain is chosen
//! only when it exceeds twice its standard error over the dev queries (another sample of queries,
//! as test is, would move it that much) and twice its sd over seeds (the project's rule for a gain);
//! the highest such gain wins, and the stock model is kept where none has one. A model trained on
//! a fold's train queries is named `<method>-f<k>-s<seed>` and scored on that fold's dev set alone
//! (dataset `<anything>-f<k>`); a model that saw no query (`<method>-s<seed>`) on every dev set.
//! Test is read afterwards, once, for the chosen method and the stock model (`ChoiceReport`).
use super::dev_evidence::QueryEvidence;
use super::over_seeds::{mean_sd, method_of};
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::fmt::Write;
use std::path::Path;

/// One candidate's dev figures.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct DevRow {
    pub method: String,
    /// Per seed: the mean over the dev sets the seed's models were scored on, and the mean gain
    /// over the stock model on those same sets (for the stock model: per dev set, its score).
    pub seeds: Vec<(String, f64, f64)>,
    pub mean: f64,
    pub sd: Option<f64>,
    /// The paired gain over dev queries: each query's score (its seeds' mean, from the models
    /// that may be scored on it) less the stock model's on that query, averaged over queries.
    /// What chooses.
    pub gain: f64,
    /// The dev queries the gain is over.
    pub queries: usize,
    /// The gain's standard error over those queries (sd / sqrt(queries)): how far another
    /// sample of queries would move it.
    pub gain_se: Option<f64>,
    /// The sd over seeds of each seed's gain (its models' mean over the dev sets): how far
    /// another seed would move it.
    pub seed_sd: Option<f64>,
    /// Whether the gain exceeds twice its standard error over queries and twice its sd over seeds
    /// (where there are 2+ seeds): only such a gain may be chosen, as a gain counts in every
    /// report here.
    pub counts: bool,
    /// Mean wall time of the steps that trained the method's models (dev folds and finals).
    pub wall_seconds: Option<f64>,
    /// What the gain rests on beside its mean: queries won and lost, the median, each fold's
    /// gain, a bootstrap's lower bound (dev_evidence.rs). Absent from a report written before it.
    #[serde(default)]
    pub evidence: QueryEvidence,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Choice {
    pub metric: String,
    /// The stock model's dev row (gain 0).
    pub baseline: DevRow,
    pub candidates: Vec<DevRow>,
    /// The chosen method (the baseline's name where it was kept).
    pub chosen: String,
    pub why: String,
}

/// One (method, seed): its (value, paired gain) on each dev set it counts on, and the model
/// scored there, entry for entry.
type Run = ((String, String), Vec<(f64, f64)>, Vec<String>);

/// A trailing `-f<digits>` of a name: its fold.
fn fold_of(name: &str) -> (String, Option<String>) {
    if let Some(i) = name.rfind("-f") {
        let digits = &name[i + 2..];
        if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
            return (name[..i].to_string(), Some(digits.to_string()));
        }
    }
    (name.to_string(), None)
}

/// (method, fold, seed) of a model folder named `<method>[-f<k>]-s<seed>`.
fn parts(model: &str) -> (String, Option<String>, String) {
    let stem = method_of(model);
    let file = Path::new(model)
        .file_name()
        .map_or(model.to_string(), |n| n.to_string_lossy().into_owned());
    let seed = file[stem.len()..]
        .trim_start_matches("-seed")
        .trim_start_matches("-s");
    let (method, fold) = fold_of(&stem);
    (method, fold, seed.to_string())
}

/// One dev query's gains being averaged: (dev set, query), its fold, the sum, the count.
type QuerySum<'a> = ((String, &'a str), Option<String>, f64, usize);

/// Per dev query (dataset, query) that `method`'s models may be scored on: the mean over those
/// models of their value, less the stock model's on the same query; with the query's fold (of a
/// dev set `<name>-f<k>` it is in, None where it is in none).
fn query_gains(
    per_query: &[(String, String, String, f64)],
    method: &str,
    stock: &str,
) -> Result<Vec<(Option<String>, f64)>> {
    let mut sums: Vec<((&str, &str), f64, usize)> = Vec::new();
    let mut base: Vec<((&str, &str), f64)> = Vec::new();
    for (model, dataset, query, v) in per_query {
        let key = (dataset.as_str(), query.as_str());
        let (m, fold, _) = parts(model);
        if method_of(model) == stock {
            base.push((key, *v));
        } else if m == method && (fold.is_none() || fold == fold_of(dataset).1) {
            match sums.iter_mut().find(|s| s.0 == key) {
                Some(s) => (s.1, s.2) = (s.1 + v, s.2 + 1),
                None => sums.push((key, *v, 1)),
            }
        }
    }
    if sums.is_empty() {
        return Err(Error::msg(format!(
            "no per-query dev scores of {method}'s models (per_query.csv beside the dev results)"
        )));
    }
    let gains = sums
        .iter()
        .map(|(key, sum, n)| match base.iter().find(|b| b.0 == *key) {
            Some(b) => Ok((*key, sum / *n as f64 - b.1)),
            None => Err(Error::msg(format!(
                "dev set {}, query {}: no per-query score of the stock model to pair {method} with",
                key.0, key.1
            ))),
        })
        .collect::<Result<Vec<_>>>()?;
    // one gain per query: a model that saw no query is scored on `dev` and on its folds `dev-f<k>`,
    // the same queries twice; counted twice they would shrink the standard error by ~1.4
    let mut per_query: Vec<QuerySum> = Vec::new();
    for ((dataset, query), g) in gains {
        let (set, fold) = fold_of(dataset);
        let key = (set, query);
        match per_query.iter_mut().find(|q| q.0 == key) {
            Some(q) => {
                (q.2, q.3) = (q.2 + g, q.3 + 1);
                q.1 = q.1.take().or(fold);
            }
            None => per_query.push((key, fold, g, 1)),
        }
    }
    Ok(per_query
        .into_iter()
        .map(|(_, fold, g, n)| (fold, g / n as f64))
        .collect())
}

impl Choice {
    /// The dev queries the label-free candidates were scored on: every judged train query.
    pub fn dev_queries(&self) -> usize {
        self.candidates.iter().map(|r| r.queries).max().unwrap_or(0)
    }

    /// The choice among `rows` (evaluate's dev results: model, dataset, metric, value) by `metric`,
    /// with `per_query` the same models' `metric` query by query (model, dataset, query, value);
    /// `baseline` the stock model's folder; `wall(model)` a model's training seconds.
    pub fn new(
        rows: &[(String, String, String, f64)],
        per_query: &[(String, String, String, f64)],
        metric: &str,
        baseline: &str,
        wall: &dyn Fn(&str) -> Option<f64>,
    ) -> Result<Choice> {
        // the stock model's score on each dev set: every gain is paired with it on the same set
        let stock = method_of(baseline);
        let mut base_on: Vec<(&str, f64)> = Vec::new();
        for (model, dataset, _, v) in rows.iter().filter(|r| r.2 == metric) {
            // the stock model may be scored on one dev set in several results files
            if method_of(model) == stock && !base_on.iter().any(|b| b.0 == dataset) {
                base_on.push((dataset.as_str(), *v));
            }
        }
        if base_on.is_empty() {
            return Err(Error::msg(format!(
                "the stock model {baseline} has no dev {metric} in the results"
            )));
        }
        // (method, seed) -> (value, gain) on each dev set its models may be scored on
        let mut runs: Vec<Run> = Vec::new();
        for (model, dataset, _, v) in rows.iter().filter(|r| r.2 == metric) {
            let (method, fold, seed) = parts(model);
            if method == stock || (fold.is_some() && fold != fold_of(dataset).1) {
                continue; // a fold's model on another fold's dev set has seen those queries
            }
            let Some(b) = base_on.iter().find(|b| b.0 == dataset) else {
                return Err(Error::msg(format!(
                    "dev set {dataset}: no score of the stock model {baseline} to pair {model} with"
                )));
            };
            let key = (method, seed);
            let at = (*v, v - b.1);
            match runs.iter_mut().find(|r| r.0 == key) {
                Some(r) => {
                    r.1.push(at);
                    r.2.push(model.clone());
                }
                None => runs.push((key, vec![at], vec![model.clone()])),
            }
        }
        let mut rows_by: Vec<DevRow> = Vec::new();
        for ((method, seed), at, models) in runs {
            let n = at.len() as f64;
            let (v, g) = (
                at.iter().map(|a| a.0).sum::<f64>() / n,
                at.iter().map(|a| a.1).sum::<f64>() / n,
            );
            let walls: Vec<f64> = models.iter().filter_map(|m| wall(m)).collect();
            match rows_by.iter_mut().find(|r| r.method == method) {
                Some(r) => r.seeds.push((seed, v, g)),
                None => rows_by.push(DevRow {
                    method,
                    seeds: vec![(seed, v, g)],
                    mean: 0.0,
                    sd: None,
                    gain: 0.0,
                    queries: 0,
                    gain_se: None,
                    seed_sd: None,
                    counts: false,
                    wall_seconds: (!walls.is_empty()).then(|| mean_sd(&walls).0),
                    evidence: QueryEvidence::default(),
                }),
            }
        }
        for r in &mut rows_by {
            let v: Vec<f64> = r.seeds.iter().map(|s| s.1).collect();
            let g: Vec<f64> = r.seeds.iter().map(|s| s.2).collect();
            (r.mean, r.sd) = mean_sd(&v);
            r.seed_sd = mean_sd(&g).1;
            let by_query = query_gains(per_query, &r.method, &stock)?;
            r.evidence = QueryEvidence::of(&by_query);
            let d: Vec<f64> = by_query.iter().map(|q| q.1).collect();
            r.queries = d.len();
            let (gain, sd) = mean_sd(&d);
            r.gain = gain;
            r.gain_se = sd.map(|sd| sd / (d.len() as f64).sqrt());
            r.counts = r.gain_se.is_some_and(|se| r.gain > 2.0 * se)
                && r.seed_sd.is_none_or(|sd| r.gain > 2.0 * sd);
        }
        let values: Vec<f64> = base_on.iter().map(|b| b.1).collect();
        let (mean, sd) = mean_sd(&values);
        let base = DevRow {
            method: stock.clone(),
            seeds: base_on
                .iter()
                .map(|b| (b.0.to_string(), b.1, 0.0))
                .collect(),
            mean,
            sd,
            gain: 0.0,
            queries: 0,
            gain_se: None,
            seed_sd: None,
            counts: false,
            wall_seconds: None,
            evidence: QueryEvidence::default(),
        };
        let best = rows_by
            .iter()
            .filter(|r| r.counts)
            .max_by(|a, b| a.gain.total_cmp(&b.gain));
        let (chosen, why) = match best {
            Some(b) => (
                b.method.clone(),
                format!(
                    "the highest dev gain in {metric} of the {} candidates whose gain exceeds \
                     twice its standard error over dev queries and twice its sd over seeds: \
                     {:+.4} over the stock model",
                    rows_by.iter().filter(|r| r.counts).count(),
                    b.gain
                ),
            ),
            None => (
                base.method.clone(),
                format!(
                    "no candidate's dev gain in {metric} exceeds twice its standard error over \
                     dev queries and twice its sd over seeds: the stock model is kept"
                ),
            ),
        };
        Ok(Choice {
            metric: metric.to_string(),
            baseline: base,
            candidates: rows_by,
            chosen,
            why,
        })
    }

    /// The dev table as Markdown.
    pub fn markdown(&self) -> String {
        let mut s = format!(
            "Dev {}: each seed's mean over the dev sets it may be scored on (a fold's models on \
             that fold's dev queries alone, models that saw no query on all train queries), then \
             mean +- sd over seeds. The gain is paired: each dev query's score less the stock \
             model's on the same query, averaged over dev queries; it may be chosen when it \
             exceeds twice its standard error over queries and twice its sd over seeds. Beside \
             it, what it rests on: the dev queries won and lost, the median gain, each fold's \
             gain (the train queries' folds, in order) and a bootstrap over queries' lower 5% \
             bound of the mean gain.\n\n\
             | method | seeds | dev {} | gain on dev | queries | se over queries | sd over \
             seeds | counts | won / lost | median | folds | bootstrap 5% | wall time per run \
             |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
            self.metric, self.metric
        );
        let cell = |r: &DevRow| match r.sd {
            Some(sd) => format!("{:.4} +- {:.4}", r.mean, sd),
            None => format!("{:.4}", r.mean),
        };
        let wall = |r: &DevRow| {
            r.wall_seconds
                .map_or(String::new(), |w| format!("{w:.0} s"))
        };
        let b = &self.baseline;
        let per_set: Vec<String> = (b.seeds.iter())
            .map(|(set, v, _)| format!("{set} {v:.4}"))
            .collect();
        let _ = writeln!(
            s,
            "| {} (stock) | 1 | {} | | | | | | | | | | |",
            b.method,
            per_set.join("; ")
        );
        for r in &self.candidates {
            let mark = if r.method == self.chosen {
                " (chosen)"
            } else {
                ""
            };
            let e = &r.evidence;
            let signed = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:+.4}"));
            let folds: Vec<String> = e.folds.iter().map(|f| format!("{:+.4}", f.1)).collect();
            let _ = writeln!(
                s,
                "| {}{mark} | {} | {} | {:+.4} | {} | {} | {} | {} | {} / {} | {} | {} | {} | {} |",
                r.method,
                r.seeds.len(),
                cell(r),
                r.gain,
                r.queries,
                r.gain_se.map_or(String::new(), |se| format!("{se:.4}")),
                r.seed_sd.map_or(String::new(), |sd| format!("{sd:.4}")),
                if r.counts { "yes" } else { "no" },
                e.won,
                e.lost,
                signed(e.median),
                folds.join(", "),
                signed(e.bootstrap_low),
                wall(r)
            );
        }
        let _ = writeln!(s, "\nChosen: {} ({}).", self.chosen, self.why);
        s
    }
}

#[cfg(test)]
#[path = "choice_test.rs"]
mod tests;
