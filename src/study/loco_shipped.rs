//! The rules a leave-one-collection-out study shipped (its loco.json, loco.rs), applied to a
//! new run's dev figures by `choose --rule-from`.
use super::choice::Choice;
use super::loco::{same_sign, Agreement, Rule, MIN_DEV_QUERIES, STOCK};
use crate::error::{Error, Result};
use std::path::Path;

/// The rules a study shipped (its loco.json), as `choose --rule-from` applies them.
#[derive(Clone, Debug, serde::Deserialize)]
pub struct Shipped {
    pub metric: String,
    pub collections: Vec<String>,
    pub labels: Vec<String>,
    settings: Vec<ShippedSetting>,
    agreement: Agreement,
}

#[derive(Clone, Debug, serde::Deserialize)]
struct ShippedSetting {
    setting: String,
    shipped: Rule,
}

impl Shipped {
    pub fn read(path: &Path) -> Result<Shipped> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::file(path, e))?;
        let s: Shipped = serde_json::from_str(&text).map_err(|e| Error::file(path, e))?;
        for name in ["zero labels", "with labels"] {
            if !s.settings.iter().any(|x| x.setting == name) {
                return Err(Error::file(path, format!("no shipped rule for '{name}'")));
            }
        }
        Ok(s)
    }

    fn rule(&self, setting: &str) -> &Rule {
        &(self.settings.iter().find(|x| x.setting == setting))
            .expect("checked on reading")
            .shipped
    }

    /// Apply the rule with labels to `dev` (its `chosen` and `why`); the zero-label pick. A rule
    /// set on another metric, or a pick this run did not train, is refused: it would be applied
    /// to figures it was not made for.
    pub fn apply(&self, dev: &mut Choice) -> Result<String> {
        if dev.metric != self.metric {
            return Err(Error::msg(format!(
                "--rule-from: the rules were set on {}, this choice is by {}",
                self.metric, dev.metric
            )));
        }
        let mut allowed = vec![STOCK.to_string()];
        allowed.extend(dev.candidates.iter().map(|r| r.method.clone()));
        // STOCK is this run's starting model, whatever its name
        let base = dev.baseline.method.clone();
        let trained = |m: String| {
            if m == STOCK {
                Ok(base.clone())
            } else if allowed.contains(&m) {
                Ok(m)
            } else {
                Err(Error::msg(format!(
                    "--rule-from: the shipped rule picks {m}, which this run has no dev figures \
                     of (its candidates: {}); run it, or name rules set on these candidates",
                    allowed.join(", ")
                )))
            }
        };
        let rule = self.rule("with labels");
        dev.chosen = trained(rule.pick(dev, &allowed, &self.labels))?;
        let n = dev.dev_queries();
        dev.why = match rule {
            Rule::Dev { fallback, .. } if n < MIN_DEV_QUERIES => format!(
                "dev cannot decide here: {n} judged train queries, fewer than {MIN_DEV_QUERIES}; \
                 the rule's default is taken: {}",
                if fallback == STOCK {
                    format!("the stock model ({base})")
                } else {
                    fallback.clone()
                }
            ),
            _ => format!(
                "the rule set on the development collections ({}): {}",
                self.collections.join(", "),
                rule.name()
            ),
        };
        trained(self.rule("zero labels").pick(dev, &allowed, &self.labels))
    }

    /// In how many development collections a method's dev and test gains had the same sign.
    pub fn agreement(&self, method: &str) -> Option<(usize, usize)> {
        let rows = &self.agreement.iter().find(|a| a.0 == method)?.1;
        Some((same_sign(rows), rows.len()))
    }
}
