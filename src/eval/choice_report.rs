//! The report of `condenser choose`: the dev choice and the test figures read once afterwards.
use super::choice::Choice;
use super::over_seeds::SeedReport;
use crate::data::write_atomic;
use crate::error::{Context, Error, Result};
use crate::plot::{bar_chart, Figure};
use serde::Serialize;
use std::path::Path;

/// The choice on dev and, read once afterwards, the chosen method and the stock model on test
/// (None where no test set was given: the dev choice alone, test still unread).
#[derive(Clone, Debug, Serialize)]
pub struct ChoiceReport {
    pub dev: Choice,
    pub test: Option<SeedReport>,
}

impl ChoiceReport {
    pub fn markdown(&self) -> String {
        match &self.test {
            Some(test) => format!(
                "{}\nTest, read once, for the chosen method and the stock model:\n\n{}",
                self.dev.markdown(),
                test.markdown()
            ),
            None => format!("{}\nTest not read.\n", self.dev.markdown()),
        }
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
