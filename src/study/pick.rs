//! Picking a training setting on dev (`condenser pick`): each candidate value of a setting (a
//! learning rate, say) names the models trained with it (one a seed, or a size), and the value
//! whose models score the highest mean on the dev results wins. The choice is written as JSON
//! that a training command reads back (`--lr-from`), so a recipe chooses on dev and trains with
//! the choice without anyone copying a number, and a test split never takes part.
use crate::data::write_atomic;
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// One candidate value and how its models scored.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Candidate {
    pub value: String,
    pub models: Vec<String>,
    pub values: Vec<f64>,
    pub mean: f64,
    /// Sample standard deviation over the models; None for one.
    pub sd: Option<f64>,
}

/// What `pick` writes: the setting, the value chosen, and every candidate's figures.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Choice {
    pub setting: String,
    pub value: String,
    pub dataset: String,
    pub metric: String,
    pub candidates: Vec<Candidate>,
}

impl Choice {
    /// The candidate with the highest mean (the first given on a tie), from `rows` (model,
    /// dataset, metric, value) as evaluate writes them. `options` pairs each value with one model
    /// folder, as named to evaluate; a value's models are every pair that names it. A model
    /// without a result on `dataset` and `metric` is an error naming it: a missing run never
    /// silently drops out of the mean.
    pub fn pick(
        rows: &[(String, String, String, f64)],
        setting: &str,
        dataset: &str,
        metric: &str,
        options: &[(String, String)],
    ) -> Result<Choice> {
        let mut candidates: Vec<Candidate> = Vec::new();
        for (value, model) in options {
            let score = rows
                .iter()
                .find(|(m, d, k, _)| m == model && d == dataset && k == metric)
                .map(|r| r.3)
                .ok_or_else(|| {
                    Error::msg(format!(
                        "no {metric} on {dataset} for model {model} ({setting}={value}) in the results"
                    ))
                })?;
            match candidates.iter_mut().find(|c| &c.value == value) {
                Some(c) => {
                    c.models.push(model.clone());
                    c.values.push(score);
                }
                None => candidates.push(Candidate {
                    value: value.clone(),
                    models: vec![model.clone()],
                    values: vec![score],
                    mean: 0.0,
                    sd: None,
                }),
            }
        }
        if candidates.is_empty() {
            return Err(Error::msg("no candidates: give --candidate VALUE=MODEL"));
        }
        for c in &mut candidates {
            (c.mean, c.sd) = super::over_seeds::mean_sd(&c.values);
        }
        let best =
            candidates.iter().enumerate().fold(
                0,
                |b, (i, c)| if c.mean > candidates[b].mean { i } else { b },
            );
        Ok(Choice {
            setting: setting.to_string(),
            value: candidates[best].value.clone(),
            dataset: dataset.to_string(),
            metric: metric.to_string(),
            candidates,
        })
    }

    pub fn save(&self, path: &Path) -> Result<()> {
        let text = serde_json::to_string_pretty(self).expect("a choice serializes");
        write_atomic(path, text.as_bytes())
    }

    /// A choice file `pick` wrote, refused unless it chose `setting`.
    pub fn load(path: &Path, setting: &str) -> Result<Choice> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::file(path, e))?;
        let c: Choice = serde_json::from_str(&text)
            .map_err(|e| Error::file(path, format!("not a choice `pick` wrote: {e}")))?;
        if c.setting != setting {
            return Err(Error::file(
                path,
                format!("chose {}, not {setting}", c.setting),
            ));
        }
        Ok(c)
    }

    /// One line a candidate, the chosen one marked.
    pub fn table(&self) -> String {
        let mut s = format!("{} on {} ({}):\n", self.setting, self.dataset, self.metric);
        for c in &self.candidates {
            let sd = c.sd.map(|v| format!(" +- {v:.4}")).unwrap_or_default();
            let mark = if c.value == self.value {
                "  <- chosen"
            } else {
                ""
            };
            s.push_str(&format!(
                "  {}={}: {:.4}{sd} over {} model(s){mark}\n",
                self.setting,
                c.value,
                c.mean,
                c.models.len()
            ));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(m: &str, v: f64) -> (String, String, String, f64) {
        (m.into(), "dev".into(), "spearman_cosine".into(), v)
    }

    #[test]
    fn the_value_with_the_highest_mean_wins_and_a_missing_model_is_an_error() {
        let rows = vec![
            row("a-s1", 0.70),
            row("a-s2", 0.74),
            row("b-s1", 0.73),
            row("b-s2", 0.72),
        ];
        let opts = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(v, m)| (v.to_string(), m.to_string()))
                .collect()
        };
        let c = Choice::pick(
            &rows,
            "lr",
            "dev",
            "spearman_cosine",
            &opts(&[
                ("1e-4", "a-s1"),
                ("1e-4", "a-s2"),
                ("5e-4", "b-s1"),
                ("5e-4", "b-s2"),
            ]),
        )
        .unwrap();
        // b's mean 0.725 beats a's 0.72 though a has the single best run
        assert_eq!(c.value, "5e-4");
        assert_eq!(c.candidates[0].models, vec!["a-s1", "a-s2"]);
        assert!((c.candidates[0].sd.unwrap() - 0.02828).abs() < 1e-4);
        let e = Choice::pick(
            &rows,
            "lr",
            "dev",
            "spearman_cosine",
            &opts(&[("1e-4", "c-s1")]),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("c-s1") && e.contains("lr=1e-4"), "{e}");
        let e = Choice::pick(
            &rows,
            "lr",
            "test",
            "spearman_cosine",
            &opts(&[("1e-4", "a-s1")]),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("on test"), "{e}");
    }
}
