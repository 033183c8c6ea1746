//! Reading a recipe: its [vars] (overridden by --set), every `{VAR}` substituted, steps and list
//! items kept or left out by `when`, each step's arguments in the subcommand's own flag form.
use super::step::Step;
use crate::error::{Error, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Clone, Debug)]
pub struct Recipe {
    pub path: PathBuf,
    pub vars: BTreeMap<String, String>,
    pub steps: Vec<Step>,
    /// Where the run's state (finished steps) is kept: the `out` variable, or `out/<file stem>`.
    pub state_dir: PathBuf,
}

impl Recipe {
    /// Read a recipe; `overrides` (NAME=VALUE) replace its `[vars]`.
    pub fn load(path: &Path, overrides: &[(String, String)]) -> Result<Recipe> {
        let doc = read_toml(path)?;
        known_keys(&doc, RECIPE_KEYS, "")
            .map_err(|m| Error::file(path, format!("{m} (a recipe has [vars] and [[step]])")))?;
        let recipe = Recipe::from_table(path, &doc, overrides)?;
        if recipe.steps.is_empty() {
            return Err(Error::file(path, "no [[step]] tables"));
        }
        Ok(recipe)
    }

    /// A recipe from a parsed file whose `[[step]]` tables may be absent (a grid file's
    /// preparation steps); other tables are left to the caller.
    pub fn from_table(
        path: &Path,
        doc: &toml::Table,
        overrides: &[(String, String)],
    ) -> Result<Recipe> {
        let bad = |m: String| Error::file(path, m);
        let mut vars = BTreeMap::new();
        if let Some(v) = doc.get("vars") {
            let t = v
                .as_table()
                .ok_or_else(|| bad("[vars] must be a table".into()))?;
            for (k, v) in t {
                vars.insert(
                    k.clone(),
                    scalar(v).ok_or_else(|| {
                        bad(format!("vars.{k}: expected a string, number or boolean"))
                    })?,
                );
            }
        }
        for (k, v) in overrides {
            check_override(k, &vars, doc).map_err(bad)?;
            vars.insert(k.clone(), v.clone());
        }
        let vars = resolve_vars(vars).map_err(bad)?;
        let mut steps = Vec::new();
        let empty = Vec::new();
        let list = match doc.get("step") {
            None => &empty,
            Some(s) => s
                .as_array()
                .ok_or_else(|| bad("step: expected [[step]] tables".into()))?,
        };
        for (i, s) in list.iter().enumerate() {
            let s = s
                .as_table()
                .ok_or_else(|| bad(format!("step {}: expected a table", i + 1)))?;
            let name = s
                .get("name")
                .and_then(|n| n.as_str())
                .map(String::from)
                .unwrap_or_else(|| format!("step-{}", i + 1));
            let ctx = |m: String| bad(format!("step '{name}': {m}"));
            known_keys(s, STEP_KEYS, "").map_err(ctx)?;
            if !wanted(s, &vars).map_err(ctx)? {
                continue;
            }
            for (tag, vars) in for_each(s, &vars).map_err(ctx)? {
                steps.push(build_step(s, format!("{name}{tag}"), &vars).map_err(ctx)?);
            }
        }
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let state_dir = vars
            .get("out")
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new("out").join(stem));
        Ok(Recipe {
            path: path.to_path_buf(),
            vars,
            steps,
            state_dir,
        })
    }
}

/// One step's table with `vars` bound: its argv, outputs and --out. An element of a list
/// argument may be `{ for_each = { VAR = "v1 v2 ..." }, value = "..." }`: one value per item
/// (and `when`, as a step's).
fn build_step(
    s: &toml::Table,
    name: String,
    vars: &BTreeMap<String, String>,
) -> std::result::Result<Step, String> {
    let sub = |v: &str| substitute(v, vars);
    let command = s
        .get("command")
        .and_then(|c| c.as_str())
        .ok_or_else(|| String::from("missing command"))?
        .to_string();
    let mut args = Vec::new();
    for p in s
        .get("positional")
        .and_then(|p| p.as_array())
        .into_iter()
        .flatten()
    {
        args.push(sub(
            &scalar(p).ok_or_else(|| String::from("positional: strings only"))?
        )?);
    }
    let mut out = None;
    if let Some(a) = s.get("args") {
        let a = a
            .as_table()
            .ok_or_else(|| String::from("args must be a table"))?;
        for (k, v) in a {
            let flag = format!("--{}", k.replace('_', "-"));
            let items: Vec<&toml::Value> = match v {
                toml::Value::Array(xs) => xs.iter().collect(),
                x => vec![x],
            };
            for v in items {
                let values = match v {
                    toml::Value::Boolean(true) => {
                        args.push(flag.clone());
                        continue;
                    }
                    toml::Value::Boolean(false) => continue,
                    toml::Value::Table(t) if !wanted(t, vars)? => continue,
                    toml::Value::Table(t) => {
                        let value = t.get("value").and_then(scalar).ok_or_else(|| {
                            format!("args.{k}: a table item needs for_each and a string value")
                        })?;
                        for_each(t, vars)?
                            .into_iter()
                            .map(|(_, vars)| substitute(&value, &vars))
                            .collect::<std::result::Result<Vec<_>, _>>()?
                    }
                    v => vec![sub(&scalar(v).ok_or_else(|| {
                        format!(
                            "args.{k}: expected a string, number, boolean, list or for_each table"
                        )
                    })?)?],
                };
                for s in values {
                    if k == "out" {
                        out = Some(PathBuf::from(&s));
                    }
                    args.push(flag.clone());
                    args.push(s);
                }
            }
        }
    }
    let mut outputs = Vec::new();
    for o in s
        .get("outputs")
        .and_then(|o| o.as_array())
        .into_iter()
        .flatten()
    {
        outputs.push(PathBuf::from(sub(o
            .as_str()
            .ok_or_else(|| String::from("outputs: strings only"))?)?));
    }
    Ok(Step {
        name,
        command,
        args,
        outputs,
        out,
    })
}

type Vars = BTreeMap<String, String>;

/// A table's `when = "{VAR}"` (a step, or an item of a list argument): "true" keeps it, "false"
/// leaves it out, so that a recipe's optional rows hang on one variable; anything else is an
/// error rather than a guess.
fn wanted(t: &toml::Table, vars: &BTreeMap<String, String>) -> std::result::Result<bool, String> {
    let Some(w) = t.get("when") else {
        return Ok(true);
    };
    let v = substitute(&scalar(w).ok_or("when: expected a string")?, vars)?;
    match v.trim() {
        "true" => Ok(true),
        "false" => Ok(false),
        other => Err(format!("when = \"{other}\": expected true or false")),
    }
}

/// The variable bindings a table's `for_each = { VAR = "a b c" }` asks for (the values, after
/// substitution, split on spaces or commas), each with its tag (`[VAR=a]`); several variables
/// (`{ fold = "0 1 2", seed = "1 2" }`) give every combination, in the variables' name order.
/// Without `for_each`, `vars` alone and no tag. Recipes repeat a step per seed (and fold) this way.
fn for_each(
    t: &toml::Table,
    vars: &BTreeMap<String, String>,
) -> std::result::Result<Vec<(String, Vars)>, String> {
    let Some(f) = t.get("for_each") else {
        return Ok(vec![(String::new(), vars.clone())]);
    };
    let f = f
        .as_table()
        .filter(|f| !f.is_empty())
        .ok_or("for_each: a table of VAR = \"values\" pairs")?;
    let mut out = vec![(String::new(), vars.clone())];
    for (var, values) in f {
        let values = substitute(
            &scalar(values).ok_or("for_each: the values are a string")?,
            vars,
        )?;
        let values: Vec<&str> = values
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|v| !v.is_empty())
            .collect();
        if values.is_empty() {
            return Err(format!("for_each.{var}: no values"));
        }
        out = out
            .into_iter()
            .flat_map(|(tag, bound)| {
                values.iter().map(move |v| {
                    let mut b = bound.clone();
                    b.insert(var.clone(), v.to_string());
                    let sep = if tag.is_empty() { "" } else { "," };
                    let inner = tag.trim_start_matches('[').trim_end_matches(']');
                    (format!("[{inner}{sep}{var}={v}]"), b)
                })
            })
            .collect();
    }
    Ok(out)
}

/// The keys a recipe file may have at its top (a grid file adds its own and checks them).
const RECIPE_KEYS: &[&str] = &["vars", "step"];
/// The keys of a `[[step]]` table: anything else (a misspelt `argz`) would be silently ignored.
const STEP_KEYS: &[&str] = &[
    "name",
    "command",
    "args",
    "positional",
    "outputs",
    "when",
    "for_each",
];

/// Every key of `t` is one of `valid`; the first that is not is named with the nearest valid one.
pub fn known_keys(
    t: &toml::Table,
    valid: &[&str],
    prefix: &str,
) -> std::result::Result<(), String> {
    match t.keys().find(|k| !valid.contains(&k.as_str())) {
        None => Ok(()),
        Some(k) => Err(format!(
            "unknown key '{prefix}{k}'{}",
            match nearest(k, valid.iter().copied()) {
                Some(n) => format!("; did you mean '{prefix}{n}'?"),
                None => format!(" (valid: {})", valid.join(", ")),
            }
        )),
    }
}

/// The valid name closest to a misspelt one, when one is close enough to be meant.
fn nearest<'a>(name: &str, valid: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    valid
        .map(|v| (strsim::jaro_winkler(name, v), v))
        .filter(|(score, _)| *score > 0.7)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, v)| v)
}

/// `--set NAME=VALUE` must name a variable the recipe declares in [vars] or uses as `{NAME}`;
/// a misspelt one would otherwise leave the recipe's own value in force without a word.
fn check_override(
    name: &str,
    vars: &BTreeMap<String, String>,
    doc: &toml::Table,
) -> std::result::Result<(), String> {
    if vars.contains_key(name) {
        return Ok(());
    }
    fn mentions(v: &toml::Value, pat: &str) -> bool {
        match v {
            toml::Value::String(s) => s.contains(pat),
            toml::Value::Array(xs) => xs.iter().any(|x| mentions(x, pat)),
            toml::Value::Table(t) => t.values().any(|x| mentions(x, pat)),
            _ => false,
        }
    }
    let pat = format!("{{{name}}}");
    if doc.values().any(|v| mentions(v, &pat)) {
        return Ok(());
    }
    Err(format!(
        "--set {name}: the recipe has no variable '{name}'{} (its variables: {})",
        nearest(name, vars.keys().map(String::as_str))
            .map(|n| format!("; did you mean '{n}'?"))
            .unwrap_or_default(),
        vars.keys().cloned().collect::<Vec<_>>().join(", ")
    ))
}

/// A TOML file, parsed.
pub fn read_toml(path: &Path) -> Result<toml::Table> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::file(path, e))?;
    text.parse()
        .map_err(|e| Error::file(path, format!("invalid TOML: {e}")))
}

fn scalar(v: &toml::Value) -> Option<String> {
    match v {
        toml::Value::String(s) => Some(s.clone()),
        toml::Value::Integer(i) => Some(i.to_string()),
        toml::Value::Float(f) => Some(f.to_string()),
        toml::Value::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Replace every {name} by its variable; an unknown name is an error.
pub fn substitute(s: &str, vars: &BTreeMap<String, String>) -> std::result::Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let close = rest[open..]
            .find('}')
            .ok_or_else(|| format!("unclosed '{{' in '{s}'"))?
            + open;
        let name = &rest[open + 1..close];
        out.push_str(
            vars.get(name)
                .ok_or_else(|| format!("unknown variable {{{name}}} in '{s}'"))?,
        );
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Variables may use each other ({data}/train.parquet); resolve until nothing changes.
fn resolve_vars(
    mut vars: BTreeMap<String, String>,
) -> std::result::Result<BTreeMap<String, String>, String> {
    for _ in 0..=vars.len() {
        let next: BTreeMap<String, String> = vars
            .iter()
            .map(|(k, v)| Ok((k.clone(), substitute(v, &vars)?)))
            .collect::<std::result::Result<_, String>>()?;
        if next == vars {
            return Ok(vars);
        }
        vars = next;
    }
    Err("variables refer to each other in a cycle".into())
}
