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
    /// Per seed: the mean over the dev sets the seed's models were scored on, and the mean gain
    /// over the stock model on those same sets (for the stock model: per dev set, its score).
    pub seeds: Vec<(String, f64, f64)>,
    pub mean: f64,
    pub sd: Option<f64>,
    /// The mean over seeds of the paired gain: what chooses.
    pub gain: f64,
    /// The sd of the gain over the method's runs (one a model: each fold and seed).
    pub gain_sd: Option<f64>,
    /// Whether the gain exceeds twice that sd: only such a gain may be chosen, as a gain counts in
    /// every report here.
    pub counts: bool,
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

impl Choice {
    /// The choice among `rows` (evaluate's dev results: model, dataset, metric, value) by `metric`;
    /// `baseline` the stock model's folder; `wall(model)` a model's training seconds.
    pub fn new(
        rows: &[(String, String, String, f64)],
        metric: &str,
        baseline: &str,
        wall: &dyn Fn(&str) -> Option<f64>,
    ) -> Result<Choice> {
        // the stock model's score on each dev set: every gain is paired with it on the same set
        let stock = method_of(baseline);
        let mut base_on: Vec<(&str, f64)> = Vec::new();
        for (model, dataset, _, v) in rows.iter().filter(|r| r.2 == metric) {
            if method_of(model) == stock {
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
        // each model's own gain (its mean over the sets it counts on): the runs whose spread a
        // method's gain must exceed, fold by fold and seed by seed
        let mut per_model: Vec<(String, String, Vec<f64>)> = Vec::new();
        for ((method, _), at, models) in &runs {
            for (a, m) in at.iter().zip(models) {
                match per_model.iter_mut().find(|x| &x.1 == m) {
                    Some(x) => x.2.push(a.1),
                    None => per_model.push((method.clone(), m.clone(), vec![a.1])),
                }
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
                    gain_sd: None,
                    counts: false,
                    wall_seconds: (!walls.is_empty()).then(|| mean_sd(&walls).0),
                }),
            }
        }
        for r in &mut rows_by {
            let v: Vec<f64> = r.seeds.iter().map(|s| s.1).collect();
            let g: Vec<f64> = r.seeds.iter().map(|s| s.2).collect();
            (r.mean, r.sd) = mean_sd(&v);
            r.gain = mean_sd(&g).0;
            let runs: Vec<f64> = (per_model.iter())
                .filter(|x| x.0 == r.method)
                .map(|x| x.2.iter().sum::<f64>() / x.2.len() as f64)
                .collect();
            r.gain_sd = mean_sd(&runs).1;
            r.counts = r.gain_sd.is_some_and(|sd| r.gain > 2.0 * sd);
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
            gain_sd: None,
            counts: false,
            wall_seconds: None,
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
                     twice its spread over runs: {:+.4} over the stock model",
                    rows_by.iter().filter(|r| r.counts).count(),
                    b.gain
                ),
            ),
            None => (
                base.method.clone(),
                format!(
                    "no candidate's dev gain in {metric} exceeds twice its spread over runs \
                     (folds and seeds): the stock model is kept"
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
             mean +- sd over seeds. The gain is paired, each dev set's score less the stock \
             model's on the same set; it may be chosen when it exceeds twice its sd over the \
             method's runs (a model each fold and seed).\n\n| method | seeds | dev {} | gain on \
             dev (sd over runs) | counts | wall time per run |\n|---|---|---|---|---|---|\n",
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
            "| {} (stock) | 1 | {} | | | |",
            b.method,
            per_set.join("; ")
        );
        for r in &self.candidates {
            let mark = if r.method == self.chosen {
                " (chosen)"
            } else {
                ""
            };
            let _ = writeln!(
                s,
                "| {}{mark} | {} | {} | {:+.4}{} | {} | {} |",
                r.method,
                r.seeds.len(),
                cell(r),
                r.gain,
                r.gain_sd.map_or(String::new(), |sd| format!(" ({sd:.4})")),
                if r.counts { "yes" } else { "no" },
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

    /// Fold models count on their own fold's dev set only, query-free models on every set they
    /// were scored on; gains pair each set's score with the stock model's on that set (raw means
    /// over unequal sets would mislead); the best gain beyond twice its spread over runs is chosen,
    /// the stock model kept when none has one (a gain from one fold of three is not enough), and a
    /// dev set without the stock model's score is an error.
    #[test]
    fn dev_picks_by_paired_gain_beyond_its_spread_and_folds_never_leak() {
        let r = |m: &str, d: &str, v: f64| (m.to_string(), d.to_string(), "ndcg".into(), v);
        let rows = vec![
            r("model/stock", "dev", 0.38),
            r("model/stock", "dev-f0", 0.30),
            r("model/stock", "dev-f1", 0.50),
            r("model/stock", "dev-f2", 0.40),
            r("o/p-s1", "dev", 0.395),
            r("o/p-s2", "dev", 0.405),
            r("o/b-f0-s1", "dev-f0", 0.31),
            r("o/b-f0-s1", "dev-f1", 0.99), // trained on dev-f1's queries: never counted
            r("o/b-f1-s1", "dev-f1", 0.51),
            r("o/b-f2-s1", "dev-f2", 0.41),
            // one fold's big gain, two folds' losses
            r("o/pb-f0-s1", "dev-f0", 0.50),
            r("o/pb-f1-s1", "dev-f1", 0.47),
            r("o/pb-f2-s1", "dev-f2", 0.37),
        ];
        let c = Choice::new(&rows, "ndcg", "model/stock", &|_| None).unwrap();
        let row = |m: &str| c.candidates.iter().find(|x| x.method == m).unwrap().clone();
        let b = row("b");
        assert_eq!(b.seeds.len(), 1);
        assert!(
            (b.mean - 0.41).abs() < 1e-12 && (b.gain - 0.01).abs() < 1e-12,
            "{b:?}"
        );
        assert!(b.gain_sd.unwrap() < 1e-12 && b.counts);
        let p = row("p");
        assert!(
            (p.mean - 0.40).abs() < 1e-12 && (p.gain - 0.02).abs() < 1e-12,
            "{p:?}"
        );
        assert!((p.gain_sd.unwrap() - 0.005f64.hypot(0.005)).abs() < 1e-9 && p.counts);
        let pb = row("pb");
        assert!(pb.gain > p.gain && !pb.counts, "{pb:?}");
        assert_eq!(
            c.chosen, "p",
            "the higher raw mean (b) gains less on its own sets: {}",
            c.why
        );
        let worse: Vec<_> = (rows.iter())
            .filter(|x| !x.0.contains("/pb-"))
            .cloned()
            .map(|mut x| {
                if x.0.starts_with("o/") {
                    x.3 -= 0.05;
                }
                x
            })
            .collect();
        let c = Choice::new(&worse, "ndcg", "model/stock", &|_| None).unwrap();
        assert_eq!(c.chosen, "stock", "{}", c.why);
        assert!(Choice::new(&worse, "ndcg", "model/other", &|_| None).is_err());
        let unpaired: Vec<_> = (rows.into_iter())
            .filter(|x| x.1 != "dev-f1" || x.0.starts_with("o/"))
            .collect();
        let e = Choice::new(&unpaired, "ndcg", "model/stock", &|_| None).unwrap_err();
        assert!(e.to_string().contains("dev set dev-f1"), "{e}");
    }
}
