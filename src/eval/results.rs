use super::Metrics;
use crate::data::write_atomic;
use crate::error::{Context, Result};
use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};
use std::fmt::Write;
use std::path::Path;

#[derive(Clone, Debug, Serialize)]
pub struct EvalResult {
    pub model: String,
    pub dataset: String,
    /// The evaluator's kind's task name (sts, classification, retrieval, nli).
    pub task: &'static str,
    /// Its kind's headline metrics (the terminal's table).
    #[serde(skip)]
    pub headline: &'static [&'static str],
    /// The evaluator's primary metric.
    pub primary: String,
    #[serde(serialize_with = "ordered")]
    pub metrics: Metrics,
    /// The primary metric per query (retrieval), saved as per_query.csv rather than in
    /// results.json.
    #[serde(skip)]
    pub per_query: Vec<(String, f64)>,
}

fn ordered<S: Serializer>(m: &Metrics, s: S) -> std::result::Result<S::Ok, S::Error> {
    let mut map = s.serialize_map(Some(m.len()))?;
    for (k, v) in m {
        map.serialize_entry(k, v)?;
    }
    map.end()
}

impl EvalResult {
    pub fn get(&self, name: &str) -> Option<f64> {
        self.metrics
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| *v)
    }
}

/// Every model x dataset result of one `evaluate` run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct EvalReport {
    pub results: Vec<EvalResult>,
}

impl EvalReport {
    /// (model, dataset, metric, value) rows, as `report` reads them from results.csv.
    pub fn rows(&self) -> Vec<(String, String, String, f64)> {
        let mut rows = Vec::new();
        for e in &self.results {
            for (k, v) in &e.metrics {
                rows.push((e.model.clone(), e.dataset.clone(), k.clone(), *v));
            }
        }
        rows
    }

    /// Every model on every (named) dataset, in order; `bar(model, dataset)` gives each run's
    /// progress bar.
    pub fn run(
        models: &[std::path::PathBuf],
        sets: &[(String, Box<dyn super::Evaluator>)],
        inference: &crate::model::InferenceOptions,
        batch: usize,
        bar: impl Fn(&str, &str) -> indicatif::ProgressBar,
    ) -> crate::error::Result<EvalReport> {
        let mut report = EvalReport::default();
        for dir in models {
            let loaded = crate::model::Loaded::load(dir, inference)?;
            // an installed model by its name, as it was given (not ~/.cache/...), any other
            // folder as its path: the tables and results.csv read the same from any machine
            let model = crate::model::folders::home::display_name(dir);
            for (name, ev) in sets {
                let pb = bar(&model, name);
                let e = ev.run(&super::Model::loaded(&loaded, dir), batch, &pb)?;
                pb.finish_and_clear();
                report.results.push(EvalResult {
                    model: model.clone(),
                    dataset: name.clone(),
                    task: ev.kind().task,
                    headline: ev.kind().headline,
                    primary: e.primary,
                    metrics: e.metrics,
                    per_query: e.per_query,
                });
            }
        }
        Ok(report)
    }

    pub fn table(&self) -> String {
        let mw = self
            .results
            .iter()
            .map(|r| r.model.len())
            .max()
            .unwrap_or(5)
            .max(5);
        let dw = self
            .results
            .iter()
            .map(|r| r.dataset.len())
            .max()
            .unwrap_or(7)
            .max(7);
        let mut s = format!(
            "{:<mw$}  {:<dw$}  {:<14}  metrics\n",
            "model", "dataset", "task"
        );
        for r in &self.results {
            let _ = write!(s, "{:<mw$}  {:<dw$}  {:<14} ", r.model, r.dataset, r.task);
            for h in r.headline {
                // retrieval names carry the score function as a prefix
                if let Some((k, v)) = r
                    .metrics
                    .iter()
                    .find(|(k, _)| k == h || k.ends_with(&format!("_{h}")))
                {
                    let _ = write!(s, " {k}={v:.4}");
                }
            }
            s.push('\n');
        }
        s
    }

    /// One row per metric: model, dataset, task, metric, value.
    pub fn to_csv(&self) -> Result<String> {
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record(["model", "dataset", "task", "metric", "value"])
            .doing("writing results.csv")?;
        for r in &self.results {
            for (k, v) in &r.metrics {
                w.write_record([r.model.as_str(), &r.dataset, r.task, k, &v.to_string()])
                    .doing("writing results.csv")?;
            }
        }
        let bytes = w
            .into_inner()
            .map_err(|e| e.into_error())
            .doing("writing results.csv")?;
        Ok(String::from_utf8(bytes).expect("CSV of UTF-8 fields"))
    }

    /// `metric` query by query: (model, dataset, query, value), as `read_per_query` reads them
    /// back from per_query.csv (only the primary metric is scored query by query).
    pub fn per_query_rows(&self, metric: &str) -> Vec<(String, String, String, f64)> {
        (self.results.iter().filter(|r| r.primary == metric))
            .flat_map(|r| {
                (r.per_query.iter())
                    .map(|(q, v)| (r.model.clone(), r.dataset.clone(), q.clone(), *v))
            })
            .collect()
    }

    /// The primary metric of each query, one a row: model, dataset, query, metric, value; None
    /// where no evaluator scored queries one by one.
    pub fn per_query_csv(&self) -> Result<Option<String>> {
        if self.results.iter().all(|r| r.per_query.is_empty()) {
            return Ok(None);
        }
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record(["model", "dataset", "query", "metric", "value"])
            .doing("writing per_query.csv")?;
        for r in &self.results {
            for (q, v) in &r.per_query {
                w.write_record([&r.model, &r.dataset, q, &r.primary, &v.to_string()])
                    .doing("writing per_query.csv")?;
            }
        }
        let bytes = w
            .into_inner()
            .map_err(|e| e.into_error())
            .doing("writing per_query.csv")?;
        Ok(Some(String::from_utf8(bytes).expect("CSV of UTF-8 fields")))
    }

    /// results.json and results.csv in `dir`, and per_query.csv where queries were scored one by
    /// one (what `choose` pairs over).
    pub fn save(&self, dir: &Path) -> Result<()> {
        write_atomic(
            &dir.join("results.json"),
            (serde_json::to_string_pretty(self).expect("serializes") + "\n").as_bytes(),
        )?;
        if let Some(csv) = self.per_query_csv()? {
            write_atomic(&dir.join("per_query.csv"), csv.as_bytes())?;
        }
        write_atomic(&dir.join("results.csv"), self.to_csv()?.as_bytes())
    }
}
