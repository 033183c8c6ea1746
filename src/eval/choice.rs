//! Choosing a method on dev queries, never on test (`condenser choose`): every candidate's dev
//! score from evaluate's results, a method's seeds averaged over the dev folds it may be scored on,
//! the highest mean chosen, and the stock model kept where no candidate beats it on dev. A model
//! trained on a fold's train queries is named `<method>-f<k>-s<seed>` and scored on that fold's dev
//! set alone (dataset `<anything>-f<k>`); a model that saw no query (`<method>-s<seed>`) on every
//! dev set. Test is read afterwards, once, for the chosen method and the stock model
//! (`ChoiceReport`).
use super::over_seeds::{mean_sd, method_of, SeedReport};
use crate::data::write_atomic;
use crate::error::{Context, Error, Result};
use crate::plot::{bar_chart, Figure};
use serde::Serialize;
use std::fmt::Write;
use std::path::Path;

/// One candidate's dev figures.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct DevRow {
    pub method: String,
    /// Per seed, the mean over the dev sets the seed's models were scored on.
    pub seeds: Vec<(String, f64)>,
    pub mean: f64,
    pub sd: Option<f64>,
    /// mean - the stock model's dev mean.
    pub gain: f64,
    /// Mean wall time of the steps that trained the method's models (dev folds and finals).
    pub wall_seconds: Option<f64>,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Choice {
    pub metric: String,
    /// The stock model's dev row (gain 0).
    pub baseline: DevRow,
    pub candidates: Vec<DevRow>,
    /// The chosen method (the baseline's name where it was kept).
    pub chosen: String,
    pub why: String,
}

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

impl Choice {
    /// The choice among `rows` (evaluate's dev results: model, dataset, metric, value) by `metric`;
    /// `baseline` the stock model's folder; `wall(model)` a model's training seconds.
    pub fn new(
        rows: &[(String, String, String, f64)],
        metric: &str,
        baseline: &str,
        wall: &dyn Fn(&str) -> Option<f64>,
    ) -> Result<Choice> {
        // (method, seed) -> the values of the dev sets its models may be scored on
        let mut runs: Vec<((String, String), Vec<f64>, Vec<String>)> = Vec::new();
        for (model, dataset, _, v) in rows.iter().filter(|r| r.2 == metric) {
            let (method, fold, seed) = parts(model);
            if fold.is_some() && fold != fold_of(dataset).1 {
                continue; // a fold's model on another fold's dev set has seen those queries
            }
            let key = (method, seed);
            match runs.iter_mut().find(|r| r.0 == key) {
                Some(r) => {
                    r.1.push(*v);
                    r.2.push(model.clone());
                }
                None => runs.push((key, vec![*v], vec![model.clone()])),
            }
        }
        let stock = method_of(baseline);
        let mut rows_by: Vec<DevRow> = Vec::new();
        for ((method, seed), values, models) in runs {
            let v = values.iter().sum::<f64>() / values.len() as f64;
            let walls: Vec<f64> = models.iter().filter_map(|m| wall(m)).collect();
            match rows_by.iter_mut().find(|r| r.method == method) {
                Some(r) => r.seeds.push((seed, v)),
                None => rows_by.push(DevRow {
                    method,
                    seeds: vec![(seed, v)],
                    mean: 0.0,
                    sd: None,
                    gain: 0.0,
                    wall_seconds: (!walls.is_empty()).then(|| mean_sd(&walls).0),
                }),
            }
        }
        for r in &mut rows_by {
            let v: Vec<f64> = r.seeds.iter().map(|s| s.1).collect();
            (r.mean, r.sd) = mean_sd(&v);
        }
        let i = rows_by
            .iter()
            .position(|r| r.method == stock)
            .ok_or_else(|| {
                Error::msg(format!(
                    "the stock model {baseline} has no dev {metric} in the results"
                ))
            })?;
        let base = rows_by.remove(i);
        for r in &mut rows_by {
            r.gain = r.mean - base.mean;
        }
        let best = rows_by
            .iter()
            .max_by(|a, b| a.mean.total_cmp(&b.mean))
            .filter(|b| b.mean > base.mean);
        let (chosen, why) = match best {
            Some(b) => (
                b.method.clone(),
                format!(
                    "the highest dev {metric} of {} candidates, {:+.4} over the stock model",
                    rows_by.len(),
                    b.gain
                ),
            ),
            None => (
                base.method.clone(),
                format!("no candidate beats the stock model's dev {metric}: it is kept"),
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
            "Dev {}: each seed's mean over the dev sets it may be scored on, then mean +- sd \
             over seeds.\n\n| method | seeds | dev {} | gain on dev | wall time per run |\n\
             |---|---|---|---|---|\n",
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
        let _ = writeln!(
            s,
            "| {} (stock) | {} | {} | | |",
            b.method,
            b.seeds.len(),
            cell(b)
        );
        for r in &self.candidates {
            let mark = if r.method == self.chosen {
                " (chosen)"
            } else {
                ""
            };
            let _ = writeln!(
                s,
                "| {}{mark} | {} | {} | {:+.4} | {} |",
                r.method,
                r.seeds.len(),
                cell(r),
                r.gain,
                wall(r)
            );
        }
        let _ = writeln!(s, "\nChosen: {} ({}).", self.chosen, self.why);
        s
    }
}

/// The choice on dev and, read once afterwards, the chosen method and the stock model on test.
#[derive(Clone, Debug, Serialize)]
pub struct ChoiceReport {
    pub dev: Choice,
    pub test: SeedReport,
}

impl ChoiceReport {
    pub fn markdown(&self) -> String {
        format!(
            "{}\nTest, read once, for the chosen method and the stock model:\n\n{}",
            self.dev.markdown(),
            self.test.markdown()
        )
    }

    /// `report.md`, `report.json`, and the dev scores as a bar chart (`report.svg`, `.png`).
    pub fn save(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| Error::file(dir, e))?;
        write_atomic(&dir.join("report.md"), self.markdown().as_bytes())?;
        let json = serde_json::to_string_pretty(self).doing("serialising the report")?;
        write_atomic(&dir.join("report.json"), json.as_bytes())?;
        let bars: Vec<(String, f64, Option<f64>)> = (self.dev.candidates.iter())
            .map(|r| (r.method.clone(), r.mean, r.sd))
            .collect();
        let stock = (self.dev.baseline.method.clone(), self.dev.baseline.mean);
        let title = format!(
            "dev {} (mean +- sd over seeds); chosen: {}",
            self.dev.metric, self.dev.chosen
        );
        bar_chart(&title, &self.dev.metric, &bars, Some(stock)).save(&dir.join("report"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fold models count on their own fold's dev set only, query-free models on every one; seeds
    /// average over folds; the best mean is chosen, and the stock model kept when none beats it.
    #[test]
    fn dev_picks_and_folds_never_leak() {
        let r = |m: &str, d: &str, v: f64| (m.to_string(), d.to_string(), "ndcg".into(), v);
        let rows = vec![
            r("model/stock", "dev-f0", 0.30),
            r("model/stock", "dev-f1", 0.40),
            r("o/p-s1", "dev-f0", 0.28),
            r("o/p-s1", "dev-f1", 0.38),
            r("o/p-s2", "dev-f0", 0.30),
            r("o/p-s2", "dev-f1", 0.40),
            r("o/b-f0-s1", "dev-f0", 0.36),
            r("o/b-f0-s1", "dev-f1", 0.99), // trained on dev-f1's queries: never counted
            r("o/b-f1-s1", "dev-f1", 0.44),
        ];
        let c = Choice::new(&rows, "ndcg", "model/stock", &|_| None).unwrap();
        assert!((c.baseline.mean - 0.35).abs() < 1e-12);
        let b = c.candidates.iter().find(|x| x.method == "b").unwrap();
        assert_eq!(b.seeds.len(), 1);
        assert!((b.mean - 0.40).abs() < 1e-12, "{}", b.mean);
        let p = c.candidates.iter().find(|x| x.method == "p").unwrap();
        assert!((p.mean - 0.34).abs() < 1e-12 && p.sd.is_some());
        assert_eq!(c.chosen, "b");
        let worse: Vec<_> = rows.into_iter().filter(|x| !x.0.contains("/b-")).collect();
        let c = Choice::new(&worse, "ndcg", "model/stock", &|_| None).unwrap();
        assert_eq!(c.chosen, "stock", "{}", c.why);
        assert!(Choice::new(&worse, "ndcg", "model/other", &|_| None).is_err());
    }
}
