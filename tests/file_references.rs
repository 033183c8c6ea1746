//! Every file a comment, a script or a page names exists: a path ending in .rs, .py, .sh, .md or
//! .toml in Rust comments, and anywhere in scripts, recipes and docs, resolves against the
//! repository root, the naming file's folder, `src/`, or as the tail of a file's path (a module's
//! doc naming a sibling, `layer.rs`). Placeholders in capitals (`GRID.toml`) and addresses
//! (`https://...`) are not files; a path after a shell variable (`$root/scripts/x.sh`) is read
//! from the root, and one under a placeholder (`{out}/report.md`) is an output. The checker is tested on made-up text with a stale name and a good one.
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const EXTENSIONS: &[&str] = &["rs", "py", "sh", "md", "toml"];
/// What is checked: the repository's own text, not fetched data or build output.
const ROOTS: &[&str] = &[
    "src",
    "tests",
    "benches",
    "scripts",
    "docs",
    "recipes",
    "deploy",
    ".ci",
    "README.md",
    "Cargo.toml",
    "datasets/fetch.sh",
    "datasets/README.md",
];

fn walk(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_symlink() {
        return;
    }
    if path.is_dir() {
        for e in std::fs::read_dir(path).unwrap() {
            walk(&e.unwrap().path(), out);
        }
    } else if path.is_file() {
        out.push(path.to_path_buf());
    }
}

/// The paths with a checked extension in `text`, each with the character before it.
fn mentions(text: &str) -> Vec<(Option<char>, String)> {
    let part = |c: char| c.is_ascii_alphanumeric() || "_./-".contains(c);
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if !part(chars[i]) || (i > 0 && part(chars[i - 1])) {
            i += 1;
            continue;
        }
        let mut j = i;
        while j < chars.len() && part(chars[j]) {
            j += 1;
        }
        let token: String = chars[i..j].iter().collect();
        // a sentence's full stop is not part of the name
        let token = token.trim_end_matches('.');
        if token
            .rsplit_once('.')
            .is_some_and(|(_, ext)| EXTENSIONS.contains(&ext))
        {
            out.push((i.checked_sub(1).map(|k| chars[k]), token.to_string()));
        }
        i = j;
    }
    out
}

/// The text of `file` that names files: a Rust file's comments, every other file whole.
fn named_text(file: &Path, text: &str) -> String {
    if file.extension().is_some_and(|e| e == "rs") {
        let comments = text.lines().filter_map(|l| l.find("//").map(|k| &l[k..]));
        comments.collect::<Vec<_>>().join("\n")
    } else {
        text.to_string()
    }
}

/// Stale names in `text` of `file` (relative to `root`), given every file there is.
fn stale(root: &Path, file: &Path, text: &str, all: &BTreeSet<String>) -> Vec<String> {
    let dir = file.parent().unwrap_or(Path::new(""));
    let mut out = Vec::new();
    for (before, name) in mentions(&named_text(file, text)) {
        let stem = Path::new(&name)
            .file_stem()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if stem.is_empty() || stem.chars().all(|c| c.is_ascii_uppercase() || c == '_') {
            continue;
        }
        // an address (`https://host/x.py`) names no file here, nor a path under a variable's
        // value (`{out}/report/report.md`, `$(dirname ..)/x.sh`), nor an absolute one: outputs, or
        // unknowable
        if matches!(before, Some(':' | '}' | ')')) || name.starts_with('/') {
            continue;
        }
        // `$root/scripts/x.sh`: the first segment is the variable, the rest the repository's
        let name = match before {
            Some('$') => name.split_once('/').map_or(name.clone(), |x| x.1.into()),
            _ => name,
        };
        let mut bare = name.as_str();
        while let Some(rest) = bare.strip_prefix("./").or(bare.strip_prefix("../")) {
            bare = rest;
        }
        let found = [
            root.join(&name),
            root.join(dir).join(&name),
            root.join("src").join(&name),
        ]
        .iter()
        .any(|p| p.exists())
            || all
                .iter()
                .any(|p| p == bare || p.ends_with(&format!("/{bare}")));
        if !found {
            out.push(format!("{}: {name}", file.display()));
        }
    }
    out
}

#[test]
fn every_file_named_in_comments_scripts_and_docs_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for r in ROOTS {
        walk(&root.join(r), &mut files);
    }
    let rel = |p: &PathBuf| p.strip_prefix(root).unwrap().to_path_buf();
    let all: BTreeSet<String> = files
        .iter()
        .map(|p| rel(p).to_string_lossy().into())
        .collect();
    assert!(
        all.len() > 200,
        "only {} files found under {}",
        all.len(),
        root.display()
    );
    let mut bad = Vec::new();
    let mut checked = 0;
    for f in &files {
        let text_file = f
            .extension()
            .is_some_and(|e| EXTENSIONS.iter().any(|x| e == *x))
            || f.ends_with(".ci/run");
        let Ok(text) = std::fs::read_to_string(f) else {
            continue;
        };
        // this file's comments name example files
        if text_file && !f.ends_with("tests/file_references.rs") {
            checked += mentions(&named_text(f, &text)).len();
            bad.extend(stale(root, &rel(f), &text, &all));
        }
    }
    assert!(checked > 300, "only {checked} file names read");
    assert!(
        bad.is_empty(),
        "{} names of missing files:\n{}",
        bad.len(),
        bad.join("\n")
    );
}

#[test]
fn the_checker_finds_a_stale_name_and_passes_good_ones() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let all: BTreeSet<String> = [
        "src/model/kernels/precision.rs",
        "src/model/engine/layer.rs",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let text = "// products in bf16 (model/precision.rs), the tape in layer.rs, see\n\
                // https://example.org/a.py, GRID.toml, Cargo.toml and $root/scripts/slurm/setup.sh";
    let bad = stale(root, Path::new("src/x.rs"), text, &all);
    assert_eq!(bad, ["src/x.rs: model/precision.rs"]);
}
