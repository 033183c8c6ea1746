//! Installed models by name: the data home (CONDENSER_HOME, default ~/.cache/condenser) keeps each
//! model in `models/<name>/` (datasets/fetch.sh installs there), so `--model all-MiniLM-L6-v2`
//! names the same folder from any working folder, as a sentence-transformers user names a model.
use std::path::{Path, PathBuf};

/// The data home: `$CONDENSER_HOME`, else `~/.cache/condenser`.
pub fn home() -> PathBuf {
    match &crate::settings::get().home {
        Some(h) => h.clone(),
        None => std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("."))
            .join(".cache/condenser"),
    }
}

/// Where installed models live: `<home>/models`.
pub fn models_dir() -> PathBuf {
    home().join("models")
}

/// The names of the installed models, sorted.
pub fn installed() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(models_dir())
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| e.path().is_dir())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// The installed folder a model name stands for: `all-MiniLM-L6-v2`, or a Hub-style
/// `sentence-transformers/all-MiniLM-L6-v2` (its last part). None for anything else.
pub fn installed_folder(name: &str) -> Option<PathBuf> {
    let parts: Vec<&str> = name.split('/').collect();
    let last = match parts.as_slice() {
        [n] => *n,
        [org, n] if !org.is_empty() && !org.starts_with('.') => *n,
        _ => return None,
    };
    if last.is_empty() || last.starts_with('.') {
        return None;
    }
    Some(models_dir().join(last)).filter(|d| d.is_dir())
}

/// A model flag's value as a folder: the path where one exists, else the installed model of that
/// name, else the path as given (a folder an earlier recipe step writes, or a mistake that
/// ModelFolder::open reports with `missing_hint`). A folder in the working folder wins over an
/// installed model of the same name, as a path always does.
pub fn resolve(spec: &Path) -> PathBuf {
    if spec.exists() {
        return spec.to_path_buf();
    }
    spec.to_str()
        .and_then(installed_folder)
        .unwrap_or_else(|| spec.to_path_buf())
}

/// What to say when a model folder does not exist: where it was looked for, the installed names
/// and how to install more.
pub fn missing_hint(spec: &Path) -> String {
    let cwd = std::env::current_dir()
        .map(|d| d.display().to_string())
        .unwrap_or_default();
    let names = installed();
    let have = if names.is_empty() {
        "none is installed".to_string()
    } else {
        format!("installed: {}", names.join(", "))
    };
    let relative = if spec.is_relative() {
        format!(" (relative to {cwd})")
    } else {
        String::new()
    };
    format!(
        "no such model folder{relative}, and no installed model of that name in {} ({have}; \
         bash datasets/fetch.sh models installs all-MiniLM-L6-v2 and bert-tiny-mlm there, \
         CONDENSER_HOME moves the home)",
        models_dir().display()
    )
}

/// clap's value parser for model flags: `resolve` at parse time, so every later check (the
/// output guard, a recipe's input fingerprints, shard settings) sees the folder itself.
pub fn parse_model(s: &str) -> Result<PathBuf, String> {
    Ok(resolve(Path::new(s)))
}

/// How to write a model folder for a reader: an installed model by its name (what `--model`
/// takes back from any folder), any other folder as its path.
pub fn display_name(dir: &Path) -> String {
    let models = models_dir();
    match dir.strip_prefix(&models) {
        Ok(rest) if rest.components().count() == 1 => rest.display().to_string(),
        _ => dir.display().to_string(),
    }
}
