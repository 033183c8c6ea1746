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

/// Every `<method>-s<seed>` model folder of the first folder in `dirs` that holds any, in seed
/// order. One folder only: seeds are never filled in from a later folder, which may be another
/// run (other seeds, another test split) whose models saw this run's test queries.
fn final_models(dirs: &[PathBuf], method: &str) -> Result<Vec<PathBuf>> {
    let prefix = format!("{method}-s");
    for d in dirs.iter().filter(|d| d.is_dir()) {
        let mut found: Vec<(u64, PathBuf)> = Vec::new();
        for e in std::fs::read_dir(d).map_err(|e| Error::file(d, e))? {
            let p = e.map_err(|e| Error::file(d, e))?.path();
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
            let seed = name.as_deref().and_then(|n| n.strip_prefix(&prefix));
            if let Some(seed) = seed.and_then(|s| s.parse::<u64>().ok()) {
                if p.join("config.json").is_file() {
                    found.push((seed, p));
                }
            }
        }
        if !found.is_empty() {
            found.sort();
            return Ok(found.into_iter().map(|f| f.1).collect());
        }
    }
    Ok(Vec::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A method's finals come from one folder: a seed the first folder lacks is not taken from
    /// another run's folder (which may have trained on this run's test queries).
    #[test]
    fn finals_are_never_mixed_across_folders() {
        let root = tempfile::tempdir().unwrap();
        let model = |dir: &str, name: &str| {
            let p = root.path().join(dir).join(name);
            std::fs::create_dir_all(&p).unwrap();
            std::fs::write(p.join("config.json"), b"{}").unwrap();
            p
        };
        let this = [model("this", "b-s1"), model("this", "b-s2")];
        model("other", "b-s3");
        let other_only = model("other", "pw-s1");
        let dirs = [root.path().join("this"), root.path().join("other")];
        assert_eq!(final_models(&dirs, "b").unwrap(), this.to_vec());
        assert_eq!(final_models(&dirs, "pw").unwrap(), vec![other_only]);
        let all = to_read(Path::new("stock"), "stock", "b", &["pw".into()], &dirs).unwrap();
        assert_eq!(all.len(), 4, "{all:?}");
    }
}
