//! The report of `condenser choose`: the dev choice and the test figures read once afterwards.
use super::choice::Choice;
use super::loco_gains::{gain_of, TestGain};
use super::over_seeds::SeedReport;
use crate::data::write_atomic;
use crate::error::{Context, Error, Result};
use crate::plot::{bar_chart, Figure};
use serde::Serialize;
use std::fmt::Write;
use std::path::Path;

/// A pick and, once test is read, its gain over the stock model there.
#[derive(Clone, Debug, Serialize)]
pub struct Pick {
    pub method: String,
    pub why: String,
    pub test: Option<TestGain>,
}

/// The choice on dev and, read once afterwards, the chosen method and the stock model on test
/// (None where no test set was given: the dev choice alone, test still unread).
#[derive(Clone, Debug, Serialize)]
pub struct ChoiceReport {
    pub dev: Choice,
    pub test: Option<SeedReport>,
    /// The pick with the labels used (the dev choice).
    pub chosen: Pick,
    /// The pick for a user with no labels (where a shipped rule names one).
    pub label_free: Option<Pick>,
    /// Every method read on test: its gain paired over test queries, wins and losses.
    pub test_gains: Vec<TestGain>,
    /// Per candidate: in how many development collections its dev and test gains had one sign.
    pub agreement: Vec<(String, usize, usize)>,
}

impl ChoiceReport {
    /// The report from the dev choice, the test figures (with per-query gains and the stock
    /// model's test score) and the label-free pick.
    pub fn new(
        dev: Choice,
        test: Option<(SeedReport, f64, Vec<TestGain>)>,
        label_free: Option<(String, String)>,
        agreement: Vec<(String, usize, usize)>,
    ) -> ChoiceReport {
        let stock = dev.baseline.method.clone();
        let (test, gains, stock_score) = match test {
            Some((t, s, g)) => (Some(t), g, Some(s)),
            None => (None, Vec::new(), None),
        };
        let pick = |method: &str, why: String| Pick {
            method: method.to_string(),
            why,
            test: stock_score.and_then(|s| gain_of(method, &stock, s, &gains)),
        };
        ChoiceReport {
            chosen: pick(&dev.chosen, dev.why.clone()),
            label_free: label_free.map(|(m, why)| pick(&m, why)),
            dev,
            test,
            test_gains: gains,
            agreement,
        }
    }

    pub fn markdown(&self) -> String {
        let mut s = self.dev.markdown();
        if !self.agreement.is_empty() {
            s.push_str(
                "\nHow far a dev gain has told the test gain: in how many development collections \
                 the method's dev and test gains had the same sign (the study behind the rule).\n\n\
                 | method | dev and test agreed |\n|---|---|\n",
            );
            for (m, same, n) in &self.agreement {
                let _ = writeln!(s, "| {m} | {same} of {n} |");
            }
        }
        let Some(test) = &self.test else {
            return s + "\nTest not read.\n";
        };
        let _ = write!(
            s,
            "\nTest, read once, for the stock model, the picks and the methods named \
             beforehand:\n\n{}\n| method | gain over stock, paired over test queries | se over \
             queries | sd over seeds | queries won / lost |\n|---|---|---|---|---|\n",
            test.markdown()
        );
        for g in &self.test_gains {
            let _ = writeln!(
                s,
                "| {} | {:+.4} | {:.4} | {} | {} / {} of {} |",
                g.method,
                g.gain,
                g.se,
                g.sd.map_or(String::new(), |x| format!("{x:.4}")),
                g.wins,
                g.losses,
                g.queries
            );
        }
        let line = |who: &str, p: &Pick| match &p.test {
            Some(t) => format!(
                "\n{who}: {} ({}); on test {:+.4} over the stock model (se {:.4}).\n",
                p.method, p.why, t.gain, t.se
            ),
            None => format!("\n{who}: {} ({}).\n", p.method, p.why),
        };
        s.push_str(&line("With the labels used", &self.chosen));
        if let Some(p) = &self.label_free {
            s.push_str(&line("With no labels", p));
        }
        s
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
