//! Column specs as the `--columns` flags take them: names separated by commas, a trailing `?`
//! marking a column that is used only when the file has it ("anchor,positive,negative?").
//! One parser for every command; a spec is checked against a file's header before any row is read.
use crate::error::{Error, Result};
use std::path::Path;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Column {
    pub name: String,
    pub optional: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColumnSpec(pub Vec<Column>);

impl std::str::FromStr for ColumnSpec {
    type Err = String;
    fn from_str(spec: &str) -> std::result::Result<Self, String> {
        let mut cols: Vec<Column> = Vec::new();
        for part in spec.split(',').map(str::trim) {
            let (name, optional) = match part.strip_suffix('?') {
                Some(n) => (n.trim(), true),
                None => (part, false),
            };
            if name.is_empty() {
                return Err(format!("'{spec}': an empty column name"));
            }
            if cols.iter().any(|c| c.name == name) {
                return Err(format!("'{spec}': column '{name}' named twice"));
            }
            cols.push(Column {
                name: name.to_string(),
                optional,
            });
        }
        Ok(ColumnSpec(cols))
    }
}

/// Serialised as written on the command line (`a,b,label?`).
impl serde::Serialize for ColumnSpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl std::fmt::Display for ColumnSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|c| format!("{}{}", c.name, if c.optional { "?" } else { "" }))
            .collect();
        write!(f, "{}", parts.join(","))
    }
}

impl ColumnSpec {
    /// A spec from a literal (registries' defaults); panics on a malformed one.
    pub fn of(spec: &str) -> ColumnSpec {
        spec.parse().expect("a well-formed column spec")
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Every name, optional or not.
    pub fn names(&self) -> Vec<&str> {
        self.0.iter().map(|c| c.name.as_str()).collect()
    }

    /// The names to read from `path`: every required column (one missing is an error naming it
    /// and the columns the file has) and the optional ones the file has.
    pub fn resolve(&self, path: &Path) -> Result<Vec<String>> {
        let have = super::column_names(path)?;
        let mut out = Vec::with_capacity(self.0.len());
        for c in &self.0 {
            if have.contains(&c.name) {
                out.push(c.name.clone());
            } else if !c.optional {
                return Err(super::source::missing_column(path, &c.name, &have));
            }
        }
        Ok(out)
    }

    /// Check the count of names: `min..=max`; `what` says what they are for.
    pub fn expect(&self, min: usize, max: usize, what: &str) -> Result<()> {
        if self.0.len() < min || self.0.len() > max {
            return Err(Error::msg(format!(
                "--columns '{self}': {what} takes {}",
                if min == max {
                    format!("{min} names")
                } else {
                    format!("{min} to {max} names")
                }
            )));
        }
        Ok(())
    }
}
