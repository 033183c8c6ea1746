//! Column specs as the `--columns` flags take them: names separated by commas, a trailing `?`
//! marking a column that is used only when the file has it ("anchor,positive,negative?"), and `|`
//! between names that may stand for one column, the first the file has ("label|score": a
//! sentence-transformers dataset names its target `label` or `score`, and its trainer takes
//! whichever it finds, in that order). One parser for every command; a spec is checked against a
//! file's header before any row is read.
use crate::error::{Error, Result};
use std::path::Path;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Column {
    /// The first name; `also` holds the others `|` gave, tried in order where it is missing.
    pub name: String,
    pub also: Vec<String>,
    pub optional: bool,
}

impl Column {
    /// Every name this column may have, in the order tried.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.name.as_str()).chain(self.also.iter().map(String::as_str))
    }

    /// The first of its names among `have` (a file's columns).
    pub fn pick(&self, have: &[String]) -> Option<&str> {
        self.names().find(|n| have.iter().any(|h| h == n))
    }

    /// `pick`, or an error naming each of its names, `path` and the columns it has.
    pub fn require(&self, path: &Path, have: &[String]) -> Result<&str> {
        self.pick(have).ok_or_else(|| {
            let names: Vec<&str> = self.names().collect();
            super::source::missing_column(path, &names.join("' or '"), have)
        })
    }
}

impl std::fmt::Display for Column {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.names().collect();
        write!(
            f,
            "{}{}",
            names.join("|"),
            if self.optional { "?" } else { "" }
        )
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColumnSpec(pub Vec<Column>);

impl std::str::FromStr for ColumnSpec {
    type Err = String;
    fn from_str(spec: &str) -> std::result::Result<Self, String> {
        let mut cols: Vec<Column> = Vec::new();
        for part in spec.split(',').map(str::trim) {
            let (names, optional) = match part.strip_suffix('?') {
                Some(n) => (n.trim(), true),
                None => (part, false),
            };
            let names: Vec<String> = names.split('|').map(|n| n.trim().to_string()).collect();
            if names.iter().any(String::is_empty) {
                return Err(format!("'{spec}': an empty column name"));
            }
            for (i, name) in names.iter().enumerate() {
                if names[..i].contains(name) || cols.iter().any(|c| c.names().any(|n| n == name)) {
                    return Err(format!("'{spec}': column '{name}' named twice"));
                }
            }
            let mut names = names.into_iter();
            cols.push(Column {
                name: names.next().expect("split yields at least one name"),
                also: names.collect(),
                optional,
            });
        }
        Ok(ColumnSpec(cols))
    }
}

/// Serialised as written on the command line (`a,b,label|score?`).
impl serde::Serialize for ColumnSpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl std::fmt::Display for ColumnSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self.0.iter().map(Column::to_string).collect();
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

    /// The names to read from `path`: every required column (one missing is an error naming it
    /// and the columns the file has) and the optional ones the file has; of a column's `|`
    /// names, the first the file has.
    pub fn resolve(&self, path: &Path) -> Result<Vec<String>> {
        let have = super::column_names(path)?;
        let mut out = Vec::with_capacity(self.0.len());
        for c in &self.0 {
            match c.pick(&have) {
                Some(name) => out.push(name.to_string()),
                None if c.optional => {}
                None => return Err(c.require(path, &have).unwrap_err()),
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
