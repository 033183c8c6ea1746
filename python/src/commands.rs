//! Every command as a Python function whose keywords are the command's long flags with
//! underscores, read from the CLI's own clap definitions (one declaration of each flag: a new
//! flag needs no change here), run as the binary runs it, its summary returned as JSON.
use crate::call;
use clap::{ArgAction, CommandFactory, Parser};
use condenser::cli::{Cli, RunError};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

/// A subcommand by its path of names (`["train-biencoder"]`, `["analyze", "attention"]`).
fn find(path: &[String]) -> Option<clap::Command> {
    let mut c = Cli::command();
    for p in path {
        c = c.find_subcommand(p)?.clone();
    }
    Some(c)
}

/// Every leaf command: its path of names, about text and arguments.
fn leaves(c: &clap::Command, path: Vec<String>, out: &mut Vec<(Vec<String>, clap::Command)>) {
    let subs: Vec<_> = c
        .get_subcommands()
        .filter(|s| s.get_name() != "help")
        .collect();
    if subs.is_empty() && !path.is_empty() {
        out.push((path, c.clone()));
        return;
    }
    for s in subs {
        let mut p = path.clone();
        p.push(s.get_name().to_string());
        leaves(s, p, out);
    }
}

/// The Python keyword of an argument: its long flag with underscores, or a positional's name.
fn keyword(a: &clap::Arg) -> String {
    match a.get_long() {
        Some(l) => l.replace('-', "_"),
        None => a.get_id().as_str().to_string(),
    }
}

/// The arguments a Python caller names (help and version left out).
fn arguments(c: &clap::Command) -> Vec<&clap::Arg> {
    c.get_arguments()
        .filter(|a| !matches!(a.get_action(), ArgAction::Help | ArgAction::Version))
        .filter(|a| !a.is_hide_set())
        .collect()
}

/// [(path of names, about, [(keyword, flag or "", takes a value, repeatable, required, help,
/// default)])] for every command: what `condenser/_commands.py` builds its functions from.
#[pyfunction]
#[allow(clippy::type_complexity)]
pub fn commands() -> Vec<(
    Vec<String>,
    String,
    Vec<(String, String, bool, bool, bool, String, String)>,
)> {
    let mut all = Vec::new();
    leaves(&Cli::command(), Vec::new(), &mut all);
    all.into_iter()
        .map(|(path, c)| {
            let about = c.get_about().map(|s| s.to_string()).unwrap_or_default();
            let args = arguments(&c)
                .into_iter()
                .map(|a| {
                    let takes = !matches!(a.get_action(), ArgAction::SetTrue | ArgAction::SetFalse);
                    let many = matches!(a.get_action(), ArgAction::Append)
                        || a.get_num_args().is_some_and(|n| n.max_values() > 1);
                    let flag = a.get_long().map(|l| format!("--{l}")).unwrap_or_default();
                    let help = a.get_help().map(|s| s.to_string()).unwrap_or_default();
                    let default = a
                        .get_default_values()
                        .iter()
                        .map(|v| v.to_string_lossy().into_owned())
                        .collect::<Vec<_>>()
                        .join(",");
                    (
                        keyword(a),
                        flag,
                        takes,
                        many,
                        a.is_required_set(),
                        help,
                        default,
                    )
                })
                .collect();
            (path, about, args)
        })
        .collect()
}

/// A keyword's value as the words a command line gives it.
fn words(func: &str, key: &str, v: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    if v.is_instance_of::<PyBool>() {
        return Ok(vec![v.extract::<bool>()?.to_string()]);
    }
    if v.is_instance_of::<PyString>()
        || v.is_instance_of::<PyInt>()
        || v.is_instance_of::<PyFloat>()
    {
        return Ok(vec![v.str()?.to_string()]);
    }
    if let Ok(d) = v.cast::<PyDict>() {
        // {"K": V} as K=V words (run_recipe's set=, name=path datasets)
        let mut out = Vec::new();
        for (k, x) in d.iter() {
            for w in words(func, key, &x)? {
                out.push(format!("{}={w}", k.str()?));
            }
        }
        return Ok(out);
    }
    if v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>() {
        let mut out = Vec::new();
        for x in v.try_iter()? {
            out.extend(words(func, key, &x?)?);
        }
        return Ok(out);
    }
    // a path (os.PathLike)
    let os = v.py().import("os")?;
    match os.call_method1("fspath", (v,)) {
        Ok(p) => Ok(vec![p.str()?.to_string()]),
        Err(_) => Err(PyTypeError::new_err(format!(
            "{func}(): {key}={}: expected a string, number, bool, path, list or dict",
            v.repr()?
        ))),
    }
}

/// The nearest of `names` to `key`, for "did you mean".
fn nearest<'a>(key: &str, names: impl Iterator<Item = &'a String>) -> Option<&'a String> {
    names
        .map(|n| (strsim::jaro_winkler(key, n), n))
        .filter(|(s, _)| *s > 0.7)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, n)| n)
}

/// The command line `kwargs` make for the command at `path` (the program's name first).
fn argv(func: &str, path: &[String], kwargs: &Bound<'_, PyDict>) -> PyResult<Vec<String>> {
    let c = find(path).ok_or_else(|| PyValueError::new_err(format!("no command {path:?}")))?;
    let args = arguments(&c);
    let by_key: Vec<(String, &clap::Arg)> = args.iter().map(|a| (keyword(a), *a)).collect();
    let mut out: Vec<String> = std::iter::once("condenser".to_string())
        .chain(path.iter().cloned())
        .collect();
    let mut positionals: Vec<(usize, Vec<String>)> = Vec::new();
    let mut given = Vec::new();
    for (k, v) in kwargs.iter() {
        let key: String = k.extract()?;
        let Some((_, a)) = by_key.iter().find(|(n, _)| *n == key) else {
            let hint = nearest(&key, by_key.iter().map(|(n, _)| n))
                .map(|n| format!("; did you mean '{n}'?"))
                .unwrap_or_default();
            return Err(PyTypeError::new_err(format!(
                "{func}() got an unexpected keyword argument '{key}'{hint}"
            )));
        };
        given.push(key.clone());
        if v.is_none() {
            continue;
        }
        let flag = a.get_long().map(|l| format!("--{l}"));
        match (a.get_action(), &flag) {
            (ArgAction::SetTrue, Some(f)) => {
                let on: bool = v.extract().map_err(|_| {
                    PyTypeError::new_err(format!("{func}(): {key} is a switch: True or False"))
                })?;
                if on {
                    out.push(f.clone());
                }
            }
            (action, Some(f)) => {
                let ws = words(func, &key, &v)?;
                let many = matches!(action, ArgAction::Append)
                    || a.get_num_args().is_some_and(|n| n.max_values() > 1);
                if ws.len() > 1 && !many {
                    return Err(PyTypeError::new_err(format!(
                        "{func}(): {key} takes one value, not {}",
                        ws.len()
                    )));
                }
                if matches!(action, ArgAction::Append) {
                    for w in ws {
                        out.push(f.clone());
                        out.push(w);
                    }
                } else {
                    out.push(f.clone());
                    out.extend(ws);
                }
            }
            (_, None) => positionals.push((a.get_index().unwrap_or(0), words(func, &key, &v)?)),
        }
    }
    let missing: Vec<String> = by_key
        .iter()
        .filter(|(k, a)| a.is_required_set() && !given.contains(k))
        .map(|(k, _)| format!("'{k}'"))
        .collect();
    if !missing.is_empty() {
        return Err(PyTypeError::new_err(format!(
            "{func}() missing required keyword argument{}: {}",
            if missing.len() > 1 { "s" } else { "" },
            missing.join(", ")
        )));
    }
    // set_num_threads reaches a training's --threads too, unless the call names its own
    if let Some(n) = call::chosen_threads() {
        if by_key.iter().any(|(k, _)| k == "threads") && !given.iter().any(|g| g == "threads") {
            out.extend(["--threads".to_string(), n.to_string()]);
        }
    }
    positionals.sort_by_key(|p| p.0);
    if !positionals.is_empty() {
        // after "--": a value that starts with '-' is still a value
        out.push("--".into());
        out.extend(positionals.into_iter().flat_map(|p| p.1));
    }
    Ok(out)
}

/// Run the command at `path` with `kwargs` (show_progress: its bars on stderr); its summary as
/// a JSON string.
#[pyfunction]
#[pyo3(signature = (func, path, kwargs, show_progress = true))]
pub fn run_command(
    py: Python<'_>,
    func: &str,
    path: Vec<String>,
    kwargs: &Bound<'_, PyDict>,
    show_progress: bool,
) -> PyResult<String> {
    let argv = argv(func, &path, kwargs)?;
    let done = call::run(py, !show_progress, || {
        Ok(match condenser::cli::run_captured(argv) {
            Ok(v) => Ok(v.to_string()),
            Err(RunError::Failed(e)) => return Err(e),
            Err(RunError::Usage(kind, msg)) => Err((kind, msg)),
        })
    })?;
    done.map_err(|(kind, msg)| match kind {
        clap::error::ErrorKind::UnknownArgument
        | clap::error::ErrorKind::MissingRequiredArgument => {
            PyTypeError::new_err(format!("{func}(): {msg}"))
        }
        _ => PyValueError::new_err(format!("{func}(): {msg}")),
    })
}

/// The `condenser` command of the wheel: the binary's command line, run here. Returns the exit
/// status (clap's for help, version and usage errors).
#[pyfunction]
pub fn run_cli(py: Python<'_>, argv: Vec<String>) -> PyResult<i32> {
    let cli = match Cli::try_parse_from(&argv) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return Ok(e.exit_code());
        }
    };
    condenser::cli::set_command_line(&argv);
    call::run(py, false, || condenser::cli::dispatch(cli.command))?;
    Ok(0)
}
