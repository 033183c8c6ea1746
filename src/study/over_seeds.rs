//! Methods over seeds (`condenser report`): evaluation results (evaluate's results.csv) grouped by
//! method, a method being a model folder's name without its seed suffix (`b-mnr-s2` -> `b-mnr`),
//! reported as mean +- sample standard deviation, with the gain over a baseline counted only when
//! it exceeds twice that standard deviation (a gain within the seed spread is not a gain), and the
//! wall time of the steps that trained each run where a recipe state records it.
use crate::data::write_atomic;
use crate::error::{Context, Error, Result};
use crate::plot::{bar_chart, Figure};
use serde::Serialize;
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// One method's figures for the report's metric.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct MethodRow {
    pub method: String,
    /// The model folders (one a seed), as evaluate named them.
    pub models: Vec<String>,
    pub values: Vec<f64>,
    pub mean: f64,
    /// Sample standard deviation over seeds; None for one run.
    pub sd: Option<f64>,
    /// mean - the baseline's mean.
    pub gain: Option<f64>,
    /// The gain exceeds twice this method's standard deviation (and there are 2+ seeds).
    pub counts: bool,
    /// Mean wall time of the steps that wrote these models, where the recipe state has them.
    pub wall_seconds: Option<f64>,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct SeedReport {
    pub dataset: String,
    pub metric: String,
    pub baseline: Option<MethodRow>,
    pub methods: Vec<MethodRow>,
}

/// `b-mnr-s12` -> `b-mnr`: the folder name without a trailing `-s<digits>` (or `-seed<digits>`).
pub fn method_of(model: &str) -> String {
    let name = Path::new(model)
        .file_name()
        .map_or(model.to_string(), |n| n.to_string_lossy().into_owned());
    for tag in ["-seed", "-s"] {
        if let Some(i) = name.rfind(tag) {
            let digits = &name[i + tag.len()..];
            if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
                return name[..i].to_string();
            }
        }
    }
    name
}

/// (model, dataset, metric, value) rows of evaluate's results.csv files.
pub fn read_results(paths: &[PathBuf]) -> Result<Vec<(String, String, String, f64)>> {
    #[derive(serde::Deserialize)]
    struct Row {
        model: String,
        dataset: String,
        metric: String,
        value: f64,
    }
    let mut out = Vec::new();
    for p in paths {
        let mut r = csv::Reader::from_path(p).map_err(|e| Error::file(p, e))?;
        for (i, row) in r.deserialize::<Row>().enumerate() {
            // the header is line 1
            let row = row.map_err(|e| Error::file(p, format!("line {}: {e}", i + 2)))?;
            out.push((row.model, row.dataset, row.metric, row.value));
        }
    }
    Ok(out)
}

/// (model, dataset, query, value) rows of `metric` in the per_query.csv beside each of
/// evaluate's results.csv files `paths` (its primary metric, query by query); an error names a
/// results file without one, or without `metric` there.
pub fn read_per_query(
    paths: &[PathBuf],
    metric: &str,
) -> Result<Vec<(String, String, String, f64)>> {
    #[derive(serde::Deserialize)]
    struct Row {
        model: String,
        dataset: String,
        query: String,
        metric: String,
        value: f64,
    }
    let mut out = Vec::new();
    for results in paths {
        let p = results.with_file_name("per_query.csv");
        if !p.is_file() {
            return Err(Error::file(
                results,
                "no per_query.csv beside it: the dev choice pairs models query by query (evaluate \
                 writes one for retrieval sets; run it again)",
            ));
        }
        let mut r = csv::Reader::from_path(&p).map_err(|e| Error::file(&p, e))?;
        let before = out.len();
        for (i, row) in r.deserialize::<Row>().enumerate() {
            let row = row.map_err(|e| Error::file(&p, format!("line {}: {e}", i + 2)))?;
            if row.metric == metric {
                out.push((row.model, row.dataset, row.query, row.value));
            }
        }
        if out.len() == before {
            return Err(Error::file(
                &p,
                format!("no {metric} query by query here (it holds each set's primary metric)"),
            ));
        }
    }
    Ok(out)
}

pub(crate) fn mean_sd(v: &[f64]) -> (f64, Option<f64>) {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let sd = (v.len() > 1)
        .then(|| (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt());
    (mean, sd)
}

impl SeedReport {
    /// The `metric` on `dataset` for every method in `rows`, in first-seen order; `baseline` names
    /// a method (or a model folder) to measure gains against; `wall(model)` its step's seconds.
    pub fn new(
        rows: &[(String, String, String, f64)],
        dataset: &str,
        metric: &str,
        baseline: Option<&str>,
        wall: &dyn Fn(&str) -> Option<f64>,
    ) -> Result<SeedReport> {
        let mut groups: Vec<(String, Vec<(String, f64)>)> = Vec::new();
        for (model, _, _, v) in rows.iter().filter(|r| r.1 == dataset && r.2 == metric) {
            let m = method_of(model);
            match groups.iter_mut().find(|g| g.0 == m) {
                Some(g) => g.1.push((model.clone(), *v)),
                None => groups.push((m, vec![(model.clone(), *v)])),
            }
        }
        if groups.is_empty() {
            // say what there is, so that a near miss (ndcg@10 for cosine_ndcg@10) fixes itself
            let listed = |names: &mut dyn Iterator<Item = &str>| {
                let mut v: Vec<&str> = names.collect();
                v.sort_unstable();
                v.dedup();
                v.join(", ")
            };
            let on_set = rows.iter().filter(|r| r.1 == dataset);
            let here = listed(&mut on_set.map(|r| r.2.as_str()));
            let what = if here.is_empty() {
                let sets = listed(&mut rows.iter().map(|r| r.1.as_str()));
                format!("the results' datasets: {sets}")
            } else {
                format!("its metrics: {here}")
            };
            return Err(Error::msg(format!(
                "no results for metric '{metric}' on dataset '{dataset}'; {what}"
            )));
        }
        let row = |(method, runs): (String, Vec<(String, f64)>)| {
            let values: Vec<f64> = runs.iter().map(|r| r.1).collect();
            let (mean, sd) = mean_sd(&values);
            let walls: Vec<f64> = runs.iter().filter_map(|r| wall(&r.0)).collect();
            MethodRow {
                method,
                models: runs.into_iter().map(|r| r.0).collect(),
                values,
                mean,
                sd,
                gain: None,
                counts: false,
                wall_seconds: (!walls.is_empty()).then(|| mean_sd(&walls).0),
            }
        };
        let mut methods: Vec<MethodRow> = groups.into_iter().map(row).collect();
        let base = match baseline {
            Some(b) => {
                let i = methods
                    .iter()
                    .position(|m| {
                        m.method == b || m.method == method_of(b) || m.models.iter().any(|x| x == b)
                    })
                    .ok_or_else(|| {
                        Error::msg(format!(
                            "--baseline {b}: no such method or model among the results ({})",
                            methods
                                .iter()
                                .map(|m| m.method.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ))
                    })?;
                Some(methods.remove(i))
            }
            None => None,
        };
        if let Some(b) = &base {
            for m in &mut methods {
                let gain = m.mean - b.mean;
                m.gain = Some(gain);
                m.counts = m.sd.is_some_and(|sd| gain > 2.0 * sd);
            }
        }
        Ok(SeedReport {
            dataset: dataset.to_string(),
            metric: metric.to_string(),
            baseline: base,
            methods,
        })
    }

    /// The table as Markdown.
    pub fn markdown(&self) -> String {
        let mut s = format!(
            "{} on {}: mean +- sample sd over seeds; a gain counts when it exceeds twice the sd.\n\n\
             | method | seeds | {} | gain | counts | wall time per run |\n|---|---|---|---|---|---|\n",
            self.metric, self.dataset, self.metric
        );
        let cell = |m: &MethodRow| match m.sd {
            Some(sd) => format!("{:.4} +- {:.4}", m.mean, sd),
            None => format!("{:.4}", m.mean),
        };
        let wall = |m: &MethodRow| {
            m.wall_seconds
                .map_or(String::new(), |w| format!("{w:.0} s"))
        };
        if let Some(b) = &self.baseline {
            let _ = writeln!(
                s,
                "| {} (baseline) | {} | {} | | | {} |",
                b.method,
                b.values.len(),
                cell(b),
                wall(b)
            );
        }
        for m in &self.methods {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} |",
                m.method,
                m.values.len(),
                cell(m),
                m.gain.map_or(String::new(), |g| format!("{g:+.4}")),
                match (m.gain, m.sd) {
                    (None, _) => "",
                    (_, None) => "one seed",
                    _ if m.counts => "yes",
                    _ => "no",
                },
                wall(m)
            );
        }
        s
    }

    /// `report.md`, `report.json` and the bar chart (`report.svg`, `report.png`) in `dir`.
    pub fn save(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| Error::file(dir, e))?;
        write_atomic(&dir.join("report.md"), self.markdown().as_bytes())?;
        let json = serde_json::to_string_pretty(self).doing("serialising the report")?;
        write_atomic(&dir.join("report.json"), json.as_bytes())?;
        let bars: Vec<(String, f64, Option<f64>)> = self
            .methods
            .iter()
            .map(|m| (m.method.clone(), m.mean, m.sd))
            .collect();
        let reference = self.baseline.as_ref().map(|b| (b.method.clone(), b.mean));
        bar_chart(
            &format!(
                "{} on {} (mean +- sd over seeds)",
                self.metric, self.dataset
            ),
            &self.metric,
            &bars,
            reference,
        )
        .save(&dir.join("report"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_group_seeds_and_gains_count_beyond_twice_the_sd() {
        assert_eq!(method_of("out/x/b-mnr-s12"), "b-mnr");
        assert_eq!(method_of("out/x/b-mnr-seed3"), "b-mnr");
        assert_eq!(
            method_of("datasets/model/all-MiniLM-L6-v2"),
            "all-MiniLM-L6-v2"
        );
        assert_eq!(method_of("out/x/cross-s"), "cross-s");
        let r = |m: &str, v: f64| (m.to_string(), "d".to_string(), "ndcg".to_string(), v);
        let rows = vec![
            r("model/zero", 0.30),
            r("o/a-s1", 0.33),
            r("o/a-s2", 0.35),
            r("o/a-s3", 0.34),
            r("o/b-s1", 0.30),
            r("o/b-s2", 0.36),
            r("o/c", 0.40),
            r("o/a-s1", 9.0), // another metric's row would be filtered; this one is a second dataset
        ];
        let mut rows = rows;
        rows.last_mut().unwrap().1 = "other".into();
        let rep = SeedReport::new(&rows, "d", "ndcg", Some("model/zero"), &|m| {
            (m == "o/a-s1").then_some(10.0)
        })
        .unwrap();
        assert_eq!(rep.baseline.as_ref().unwrap().method, "zero");
        let a = &rep.methods[0];
        assert_eq!((a.method.as_str(), a.values.len()), ("a", 3));
        assert!((a.mean - 0.34).abs() < 1e-12 && (a.sd.unwrap() - 0.01).abs() < 1e-12);
        assert!(a.counts, "+0.04 > 2 x 0.01");
        assert_eq!(a.wall_seconds, Some(10.0));
        let b = &rep.methods[1];
        assert!(!b.counts, "+0.03 within 2 x 0.042");
        assert!(!rep.methods[2].counts, "one run never counts");
        let md = rep.markdown();
        assert!(
            md.contains("| a | 3 | 0.3400 +- 0.0100 | +0.0400 | yes | 10 s |"),
            "{md}"
        );
        assert!(
            md.contains("| c | 1 | 0.4000 | +0.1000 | one seed |"),
            "{md}"
        );
        assert!(SeedReport::new(&rows, "d", "ndcg", Some("nope"), &|_| None).is_err());
        // a miss lists what there is: the dataset's metrics, or the datasets
        let miss =
            |set: &str, metric: &str| match SeedReport::new(&rows, set, metric, None, &|_| None) {
                Err(e) => e.to_string(),
                Ok(_) => panic!("{set} {metric} found"),
            };
        assert!(
            miss("d", "mrr").ends_with("; its metrics: ndcg"),
            "{}",
            miss("d", "mrr")
        );
        let e = miss("x", "ndcg");
        assert!(e.ends_with("; the results' datasets: d, other"), "{e}");
    }
}
