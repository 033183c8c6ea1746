//! Which models `choose` reads on test, decided before any test score exists: the stock model,
//! then every final model (`<method>-s<seed>`, trained on all train queries) of the method chosen
//! on dev and of the methods named beforehand (`--also`).
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// The stock model, then the finals of `chosen` and of `also` (the stock method itself is read
/// once, as the stock model), each found in `dirs`.
pub fn to_read(
    baseline: &Path,
    stock_method: &str,
    chosen: &str,
    also: &[String],
    dirs: &[PathBuf],
) -> Result<Vec<PathBuf>> {
    let mut finals = vec![baseline.to_path_buf()];
    let mut methods = vec![chosen.to_string()];
    methods.extend(also.iter().filter(|m| *m != chosen).cloned());
    for m in methods.iter().filter(|m| *m != stock_method) {
        let found = final_models(dirs, m)?;
        if found.is_empty() {
            return Err(Error::msg(format!(
                "no final model {m}-s<seed> in any --models folder"
            )));
        }
        finals.extend(found);
    }
    Ok(finals)
}

/// Every `<method>-s<seed>` model folder in `dirs`, in seed order, the first folder holding a seed
/// winning.
fn final_models(dirs: &[PathBuf], method: &str) -> Result<Vec<PathBuf>> {
    let mut found: Vec<(u64, PathBuf)> = Vec::new();
    let prefix = format!("{method}-s");
    for d in dirs.iter().filter(|d| d.is_dir()) {
        for e in std::fs::read_dir(d).map_err(|e| Error::file(d, e))? {
            let p = e.map_err(|e| Error::file(d, e))?.path();
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
            let seed = name.as_deref().and_then(|n| n.strip_prefix(&prefix));
            if let Some(seed) = seed.and_then(|s| s.parse::<u64>().ok()) {
                if p.join("config.json").is_file() && !found.iter().any(|f| f.0 == seed) {
                    found.push((seed, p));
                }
            }
        }
    }
    found.sort();
    Ok(found.into_iter().map(|f| f.1).collect())
}
