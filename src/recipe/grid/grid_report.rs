//! The grid's report, read back from what its steps wrote: per source the cross-encoder's dev
//! figure; per (source, target) cell the target metric of every model (zero-shot, the source's
//! gold bi-encoder as is, (i) silver, (ii) silver + random sampling, the in-domain gold
//! bi-encoder) and the bigram Jaccard of the two train splits; and whether overlap forecasts the
//! gain over zero-shot (rank correlation over the off-diagonal cells, with its uncertainty).
use super::{Domain, Grid};
use crate::data::write_atomic;
use crate::error::{Context, Error, Result};
use crate::eval::correlation::{rank_correlation, RankCorrelation};
use crate::model::folders::home;
use crate::plot::{heatmap, scatter, Figure};
use serde::Serialize;
use serde_json::Value;
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// Permutations behind each correlation's p-value.
const PERMUTATIONS: usize = 100_000;

#[derive(Clone, Debug, Serialize)]
pub struct SourceFigure {
    pub source: String,
    /// Spearman of the cross-encoder's scores on the source's dev split (the training log's
    /// final evaluation).
    pub dev_spearman: f64,
    pub dev: String,
    pub article: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Cell {
    pub source: String,
    pub target: String,
    /// spearman_cosine or cosine_ap, on the target's held-out split.
    pub metric: String,
    /// Bigram Jaccard of the source's and the target's train splits.
    pub jaccard: f64,
    pub zero_shot: f64,
    /// The source's gold-trained bi-encoder, applied to the target as is.
    pub source_gold: f64,
    /// (i) bi-encoder on the target pairs labelled by the source cross-encoder.
    pub silver: f64,
    /// (ii) the same plus random sampling, labelled alike.
    pub silver_aug: f64,
    /// The target's own gold bi-encoder: the upper reference.
    pub in_domain_gold: f64,
    pub gain: f64,
    pub gain_aug: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Forecast {
    /// "silver" or "silver_aug": whose gain the overlap is set against.
    pub gain_of: String,
    #[serde(flatten)]
    pub correlation: RankCorrelation,
}

#[derive(Clone, Debug, Serialize)]
pub struct GridReport {
    pub domains: Vec<String>,
    pub sources: Vec<SourceFigure>,
    pub cells: Vec<Cell>,
    /// Overlap against gain over the off-diagonal cells.
    pub forecasts: Vec<Forecast>,
}

impl GridReport {
    pub fn build(grid: &Grid) -> Result<GridReport> {
        let overlap = Overlap::read(&grid.overlap_json())?;
        let mut sources = Vec::new();
        for s in &grid.domains {
            sources.push(SourceFigure {
                source: s.name.clone(),
                dev_spearman: final_eval(&grid.cross_encoder(s).join("train_log.csv"))?,
                dev: s.dev().display().to_string(),
                article: s.article,
            });
        }
        let mut cells = Vec::new();
        for t in &grid.domains {
            let results = Results::read(&grid.eval_dir(t).join("results.json"), t)?;
            let zero_shot = results.score(&grid.settings.model)?;
            let in_domain_gold = results.score(&grid.gold_biencoder(t))?;
            for s in &grid.domains {
                let silver = results.score(&grid.silver_biencoder(s, t, false))?;
                let silver_aug = results.score(&grid.silver_biencoder(s, t, true))?;
                cells.push(Cell {
                    source: s.name.clone(),
                    target: t.name.clone(),
                    metric: t.task.metric().to_string(),
                    jaccard: overlap.get(&s.name, &t.name)?,
                    zero_shot,
                    source_gold: results.score(&grid.gold_biencoder(s))?,
                    silver,
                    silver_aug,
                    in_domain_gold,
                    gain: silver - zero_shot,
                    gain_aug: silver_aug - zero_shot,
                });
            }
        }
        let off: Vec<&Cell> = cells.iter().filter(|c| c.source != c.target).collect();
        let x: Vec<f64> = off.iter().map(|c| c.jaccard).collect();
        let forecasts = [("silver", false), ("silver_aug", true)]
            .into_iter()
            .map(|(name, aug)| {
                let y: Vec<f64> = off
                    .iter()
                    .map(|c| if aug { c.gain_aug } else { c.gain })
                    .collect();
                Forecast {
                    gain_of: name.to_string(),
                    correlation: rank_correlation(&x, &y, PERMUTATIONS, grid.settings.seed),
                }
            })
            .collect();
        Ok(GridReport {
            domains: grid.domains.iter().map(|d| d.name.clone()).collect(),
            sources,
            cells,
            forecasts,
        })
    }

    /// The cells whose (i) or (ii) bi-encoder beats zero-shot.
    pub fn beating_zero_shot(&self) -> Vec<&Cell> {
        self.cells
            .iter()
            .filter(|c| c.gain > 0.0 || c.gain_aug > 0.0)
            .collect()
    }

    pub fn to_csv(&self) -> Result<String> {
        let mut w = csv::Writer::from_writer(Vec::new());
        for c in &self.cells {
            w.serialize(c)
                .map_err(|e| Error::msg(format!("grid CSV: {e}")))?;
        }
        let bytes = w
            .into_inner()
            .map_err(|e| Error::msg(format!("grid CSV: {e}")))?;
        Ok(String::from_utf8(bytes).expect("CSV of UTF-8 fields"))
    }

    /// The terminal's view: cross-encoders, then one line a cell, then the forecasts.
    pub fn table(&self) -> String {
        let mut t = String::from("source   cross-encoder dev spearman (article, bert-base)\n");
        for s in &self.sources {
            let art = s.article.map_or("-".into(), |a| format!("{a:.3}"));
            let _ = writeln!(t, "{:<8} {:.4} ({art})", s.source, s.dev_spearman);
        }
        let _ = writeln!(
            t,
            "\n{:<8} {:<8} {:<16} {:>7} {:>9} {:>11} {:>8} {:>10} {:>9} {:>8}",
            "source",
            "target",
            "metric",
            "jaccard",
            "zero-shot",
            "source-gold",
            "(i)",
            "(ii)",
            "in-domain",
            "gain(i)"
        );
        for c in &self.cells {
            let _ = writeln!(
                t,
                "{:<8} {:<8} {:<16} {:>7.4} {:>9.4} {:>11.4} {:>8.4} {:>10.4} {:>9.4} {:>+8.4}",
                c.source,
                c.target,
                c.metric,
                c.jaccard,
                c.zero_shot,
                c.source_gold,
                c.silver,
                c.silver_aug,
                c.in_domain_gold,
                c.gain
            );
        }
        for f in &self.forecasts {
            let r = &f.correlation;
            let _ = writeln!(
                t,
                "overlap vs gain of {}: spearman {:+.3} (95% CI {:+.2} .. {:+.2}; permutation p {:.3}; n = {})",
                f.gain_of, r.spearman, r.ci95[0], r.ci95[1], r.p_permutation, r.n
            );
        }
        t
    }

    /// grid.json, grid.csv, the gain heatmaps and the overlap-vs-gain scatter plots in `dir`.
    pub fn save(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).in_file(dir)?;
        let json = serde_json::to_string_pretty(self).expect("serializes");
        write_atomic(&dir.join("grid.json"), json.as_bytes())?;
        write_atomic(&dir.join("grid.csv"), self.to_csv()?.as_bytes())?;
        let n = self.domains.len();
        for (stem, label, aug) in [
            ("gain", "(i) silver", false),
            ("gain_aug", "(ii) silver + sampling", true),
        ] {
            let mut m = vec![vec![0.0; n]; n];
            for (k, c) in self.cells.iter().enumerate() {
                // cells are target-major; the heatmap's rows are sources
                m[k % n][k / n] = if aug { c.gain_aug } else { c.gain };
            }
            let title = format!("gain over zero-shot, {label} (rows: source, columns: target)");
            heatmap(&title, &self.domains, &m, 3).save(&dir.join(stem))?;
            let f = &self.forecasts[aug as usize].correlation;
            let points = self
                .cells
                .iter()
                .filter(|c| c.source != c.target)
                .map(|c| {
                    let g = if aug { c.gain_aug } else { c.gain };
                    (format!("{}>{}", c.source, c.target), c.jaccard, g)
                })
                .collect();
            let mut plot = scatter(
                &format!("bigram overlap vs gain, {label}"),
                "bigram Jaccard (source train, target train)",
                "gain over zero-shot",
                points,
            );
            plot.note = format!(
                "Spearman {:+.2}, 95% CI {:+.2}..{:+.2}, p {:.2}, n {}",
                f.spearman, f.ci95[0], f.ci95[1], f.p_permutation, f.n
            );
            plot.save(&dir.join(format!("overlap_vs_{stem}")))?;
        }
        Ok(())
    }
}

/// The last evaluation in a training log (the `eval` column).
fn final_eval(log: &Path) -> Result<f64> {
    let mut r = csv::Reader::from_path(log).map_err(|e| Error::file(log, e))?;
    let col = r
        .headers()
        .map_err(|e| Error::file(log, e))?
        .iter()
        .position(|h| h == "eval")
        .ok_or_else(|| Error::column(log, "eval", "missing column"))?;
    let mut last = None;
    for rec in r.records() {
        let rec = rec.map_err(|e| Error::file(log, e))?;
        if let Some(v) = rec.get(col).filter(|v| !v.is_empty()) {
            last = Some(
                v.parse::<f64>()
                    .map_err(|e| Error::column(log, "eval", e))?,
            );
        }
    }
    last.ok_or_else(|| Error::column(log, "eval", "no evaluation logged (was --dev given?)"))
}

struct Overlap {
    path: PathBuf,
    names: Vec<String>,
    jaccard: Vec<Vec<f64>>,
}

impl Overlap {
    fn read(path: &Path) -> Result<Overlap> {
        let v = read_json(path)?;
        let bad = || Error::file(path, "not an overlap report (names, jaccard)");
        let names = v["names"]
            .as_array()
            .ok_or_else(bad)?
            .iter()
            .map(|n| n.as_str().map(String::from).ok_or_else(bad))
            .collect::<Result<Vec<_>>>()?;
        let jaccard = v["jaccard"]
            .as_array()
            .ok_or_else(bad)?
            .iter()
            .map(|row| {
                row.as_array()
                    .ok_or_else(bad)?
                    .iter()
                    .map(|x| x.as_f64().ok_or_else(bad))
                    .collect::<Result<Vec<f64>>>()
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Overlap {
            path: path.to_path_buf(),
            names,
            jaccard,
        })
    }

    fn get(&self, a: &str, b: &str) -> Result<f64> {
        let at = |n: &str| {
            self.names
                .iter()
                .position(|x| x == n)
                .ok_or_else(|| Error::file(&self.path, format!("no domain '{n}'")))
        };
        let (i, j) = (at(a)?, at(b)?);
        self.jaccard
            .get(i)
            .and_then(|r| r.get(j))
            .copied()
            .ok_or_else(|| Error::file(&self.path, "jaccard is not names x names"))
    }
}

/// One target's results.json.
struct Results<'a> {
    path: PathBuf,
    target: &'a Domain,
    results: Vec<Value>,
}

impl<'a> Results<'a> {
    fn read(path: &Path, target: &'a Domain) -> Result<Results<'a>> {
        let v = read_json(path)?;
        let results = v["results"]
            .as_array()
            .ok_or_else(|| Error::file(path, "not an evaluate report (results)"))?
            .clone();
        Ok(Results {
            path: path.to_path_buf(),
            target,
            results,
        })
    }

    /// The target metric of `model`, as `evaluate` named it: an installed model by its name
    /// (`home::display_name`), any other folder by its path; results written before evaluate
    /// named installed models so hold the installed folder's path, which is accepted too.
    fn score(&self, model: &Path) -> Result<f64> {
        // (the model as given is always one of the two: a name or a folder outside the home
        // resolves to itself, a folder inside it displays as its name)
        let folder = home::resolve(model);
        let names = [home::display_name(&folder), folder.display().to_string()];
        let metric = self.target.task.metric();
        self.results
            .iter()
            .find(|r| {
                let m = r["model"].as_str().unwrap_or_default();
                names.iter().any(|n| n == m) && r["dataset"] == self.target.name.as_str()
            })
            .and_then(|r| r["metrics"][metric].as_f64())
            .ok_or_else(|| {
                Error::file(
                    &self.path,
                    format!("no {metric} of model {} on {}", names[0], self.target.name),
                )
            })
    }
}

fn read_json(path: &Path) -> Result<Value> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::file(path, e))?;
    serde_json::from_str(&text).map_err(|e| Error::file(path, format!("invalid JSON: {e}")))
}

#[cfg(test)]
#[path = "grid_report_test.rs"]
mod tests;
