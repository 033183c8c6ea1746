//! Small flag values shared by several subcommands.

/// A `NAME=PATH` flag value (or a bare PATH, named by its file stem).
#[derive(Clone, Debug)]
pub struct Named {
    pub name: String,
    pub path: std::path::PathBuf,
}

impl std::str::FromStr for Named {
    type Err = String;
    fn from_str(spec: &str) -> std::result::Result<Self, String> {
        let (name, path) = match spec.split_once('=') {
            Some((n, p)) if !n.is_empty() => (n.to_string(), std::path::PathBuf::from(p)),
            _ => {
                let p = std::path::PathBuf::from(spec);
                let name = p
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .ok_or_else(|| format!("'{spec}': expected NAME=PATH or a path"))?;
                (name, p)
            }
        };
        Ok(Named { name, path })
    }
}

/// A model folder's short name for tables and plots: its last path component.
pub fn short_name(dir: &std::path::Path) -> String {
    dir.file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_else(|| dir.display().to_string())
}
