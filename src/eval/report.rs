use super::Metrics;
use crate::data::write_atomic;
use crate::error::Result;
use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};
use std::fmt::Write;
use std::path::Path;

#[derive(Clone, Debug, Serialize)]
pub struct EvalResult {
    pub model: String,
    pub dataset: String,
    pub task: &'static str,
    #[serde(serialize_with = "ordered")]
    pub metrics: Metrics,
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

/// The headline metrics shown on the terminal for each task (everything is in the files).
fn headline(task: &str) -> &'static [&'static str] {
    match task {
        "sts" => &["spearman_cosine", "pearson_cosine"],
        "classification" => &["cosine_accuracy", "cosine_f1", "cosine_ap"],
        _ => &["ndcg@10", "mrr@10", "recall@100", "map@100"],
    }
}

impl EvalReport {
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
            for h in headline(r.task) {
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

    pub fn to_csv(&self) -> String {
        let mut s = String::from("model,dataset,task,metric,value\n");
        for r in &self.results {
            for (k, v) in &r.metrics {
                let _ = writeln!(
                    s,
                    "{},{},{},{k},{v}",
                    csv_field(&r.model),
                    csv_field(&r.dataset),
                    r.task
                );
            }
        }
        s
    }

    /// results.json and results.csv in `dir`.
    pub fn save(&self, dir: &Path) -> Result<()> {
        write_atomic(
            &dir.join("results.json"),
            (serde_json::to_string_pretty(self).expect("serializes") + "\n").as_bytes(),
        )?;
        write_atomic(&dir.join("results.csv"), self.to_csv().as_bytes())
    }
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}
