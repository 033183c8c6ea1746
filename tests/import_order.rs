//! The crate's floors hold without a reviewer: every path a source file names into the crate
//! (`use crate::..`, `super::..`, inline `crate::..` paths, and the binary's `condenser::..`) is
//! resolved, through re-exports, to the file that defines it, and
//! - no file imports a room above its own (the order below, top to bottom; rooms on one line may
//!   not import each other), nor, inside `model`, a floor above its own;
//! - no files import each other, directly or round a longer circle.
//!
//! Declarations (`mod x;`) and re-exports (`pub use`) are not imports. Unit tests (`#[cfg(test)]`
//! onward) are left out. The checker itself is tested on a small tree with one of each fault.
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

/// Rooms, top to bottom (docs/architecture.md).
const ROOMS: &[&[&str]] = &[
    &["cli"],
    &["augment"],
    &["train", "encode", "recipe"],
    &["eval", "overlap", "study"],
    &["search"],
    &["model", "shard", "plot"],
    &["tokenize", "runtime", "data"],
    &["settings"],
    &["hash", "error", "flags"],
];

/// `model`'s floors, top to bottom.
const MODEL_FLOORS: &[&str] = &["folders", "encoder", "engine", "layers", "kernels"];

type Module = Vec<String>;

/// The binary's modules live under this first segment (its `crate::` paths start there).
const BIN: &str = "@bin";

struct Tree {
    /// Each module's code (comments and unit tests removed), by module path.
    code: BTreeMap<Module, String>,
    /// Each module's glob re-exports (`pub use x::*`).
    globs: HashMap<Module, Vec<Module>>,
    /// Each module's names brought in by `use`: name -> the absolute path it stands for.
    names: HashMap<Module, HashMap<String, Module>>,
}

/// A use path's path and the name it brings in (`a::b as c`: a::b, c).
fn split_alias(p: &str) -> (&str, &str) {
    match p.split_once(" as ") {
        Some((path, alias)) => (path.trim(), alias.trim()),
        None => (p.trim(), p.rsplit("::").next().unwrap_or(p).trim()),
    }
}

fn strip(code: &str) -> String {
    let code = code.split("#[cfg(test)]").next().unwrap_or("");
    code.lines()
        .map(|l| match l.find("//") {
            // a "//" inside a string (a URL) cuts the line short: harmless, paths are not split
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `a::{b, c::{d, e as f}}` -> a::b, a::c::d, a::c::e as f (`self` names the prefix).
fn expand(spec: &str) -> Vec<String> {
    let spec = spec.trim();
    let Some(open) = spec.find('{') else {
        return vec![spec.to_string()];
    };
    let (prefix, body) = (&spec[..open], &spec[open + 1..spec.rfind('}').unwrap()]);
    let (mut parts, mut depth, mut cur) = (Vec::new(), 0, String::new());
    for ch in body.chars() {
        match ch {
            '{' => depth += 1,
            '}' => depth -= 1,
            _ => {}
        }
        if ch == ',' && depth == 0 {
            parts.push(std::mem::take(&mut cur));
        } else {
            cur.push(ch);
        }
    }
    parts.push(cur);
    let mut out = Vec::new();
    for p in parts.iter().map(|p| p.trim()).filter(|p| !p.is_empty()) {
        for e in expand(p) {
            match e.as_str() {
                "self" => out.push(prefix.trim_end_matches(':').to_string()),
                e if e.starts_with("self as ") => {
                    out.push(format!("{}{}", prefix.trim_end_matches(':'), &e[4..]))
                }
                _ => out.push(format!("{prefix}{e}")),
            }
        }
    }
    out
}

/// Every `use` statement's paths, with whether it is a re-export.
fn use_statements(code: &str) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = find_word(rest, "use") {
        let before = rest[..i].trim_end();
        let public = before.ends_with("pub") || before.ends_with(')') && before.contains("pub(");
        let after = &rest[i + 3..];
        let Some(end) = after.find(';') else { break };
        let spec: String = after[..end]
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        out.extend(expand(&spec).into_iter().map(|p| (p, public)));
        rest = &after[end..];
    }
    out
}

/// The start of `word` as a whole word in `s`.
fn find_word(s: &str, word: &str) -> Option<usize> {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut from = 0;
    while let Some(i) = s[from..].find(word).map(|i| i + from) {
        let before = s[..i].chars().next_back().is_none_or(|c| !ident(c));
        let after = s[i + word.len()..].chars().next().is_none_or(|c| !ident(c));
        if before && after {
            return Some(i);
        }
        from = i + word.len();
    }
    None
}

/// `code` without its `use` statements.
fn without_uses(code: &str) -> String {
    let mut out = String::new();
    let mut rest = code;
    while let Some(i) = find_word(rest, "use") {
        out.push_str(&rest[..i]);
        match rest[i..].find(';') {
            Some(end) => rest = &rest[i + end + 1..],
            None => rest = "",
        }
    }
    out.push_str(rest);
    out
}

/// Every path of two segments or more (`a::b`, `a::b::C`) outside `use` statements.
fn inline_paths(code: &str) -> Vec<String> {
    let code = without_uses(code);
    let bytes = code.as_bytes();
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let starts = ident(bytes[i]) && (i == 0 || !(ident(bytes[i - 1]) || bytes[i - 1] == b':'));
        if !starts {
            i += 1;
            continue;
        }
        let mut end = i;
        loop {
            while end < bytes.len() && ident(bytes[end]) {
                end += 1;
            }
            let more = bytes.get(end) == Some(&b':') && bytes.get(end + 1) == Some(&b':');
            if more && bytes.get(end + 2).is_some_and(|&b| ident(b)) {
                end += 2;
            } else {
                break;
            }
        }
        let path = &code[i..end];
        if path.contains("::") {
            out.push(path.to_string());
        }
        i = end.max(i + 1);
    }
    out
}

impl Tree {
    /// `files`: (path under src/, source).
    fn new(files: &[(String, String)]) -> Tree {
        let mut code = BTreeMap::new();
        for (path, src) in files {
            let Some(m) = module_of(path) else { continue };
            code.insert(m, strip(src));
        }
        let mut tree = Tree {
            code,
            globs: HashMap::new(),
            names: HashMap::new(),
        };
        let (mut globs, mut names) = (HashMap::<Module, Vec<Module>>::new(), HashMap::new());
        for (m, c) in &tree.code {
            for (p, public) in use_statements(c) {
                let (path, name) = split_alias(&p);
                let Some(abs) = tree.absolute(m, path) else {
                    continue;
                };
                if name == "*" {
                    if public {
                        globs
                            .entry(m.clone())
                            .or_default()
                            .push(abs[..abs.len() - 1].to_vec());
                    }
                    continue;
                }
                let known = names.entry(m.clone()).or_insert_with(HashMap::new);
                known.insert(name.to_string(), abs);
            }
        }
        (tree.globs, tree.names) = (globs, names);
        tree
    }

    /// The absolute path `path` names from module `m`; none for another crate's.
    fn absolute(&self, m: &Module, path: &str) -> Option<Module> {
        let segs: Vec<&str> = path.split("::").map(str::trim).collect();
        if let Some(base) = self.names.get(m).and_then(|n| n.get(segs[0])) {
            // a name brought in by `use` (not in `use` paths themselves: they start elsewhere)
            let mut abs = base.clone();
            abs.extend(segs[1..].iter().map(|s| s.to_string()));
            return Some(abs);
        }
        let bin = m.first().is_some_and(|s| s == BIN);
        let (mut base, rest): (Module, &[&str]) = match segs[0] {
            "crate" if bin => (vec![BIN.to_string()], &segs[1..]),
            "crate" | "condenser" => (vec![], &segs[1..]),
            "super" | "self" => {
                let mut base = m.clone();
                let mut i = 0;
                while i < segs.len() && (segs[i] == "super" || segs[i] == "self") {
                    if segs[i] == "super" {
                        base.pop();
                    }
                    i += 1;
                }
                (base, &segs[i..])
            }
            child => {
                let mut c = m.clone();
                c.push(child.to_string());
                match self.code.contains_key(&c) {
                    true => (m.clone(), &segs[..]),
                    false => return None,
                }
            }
        };
        base.extend(rest.iter().map(|s| s.to_string()));
        Some(base)
    }

    /// The module defining what `abs` names, following re-exports.
    fn defining(&self, abs: &Module, depth: usize) -> Module {
        let mut i = abs.len();
        while i > 0 && !self.code.contains_key(&abs[..i]) {
            i -= 1;
        }
        let m = abs[..i].to_vec();
        let Some(name) = abs.get(i) else { return m };
        if depth < 16 {
            // a module's own `use` names too: its children see them (`use super::out`)
            if let Some(target) = self.names.get(&m).and_then(|r| r.get(name)) {
                return self.defining(target, depth + 1);
            }
            for g in self.globs.get(&m).into_iter().flatten() {
                if self.code.get(g).is_some_and(|c| defines(c, name)) {
                    let mut target = g.clone();
                    target.push(name.clone());
                    return self.defining(&target, depth + 1);
                }
            }
        }
        m
    }

    /// Each module's imports: the modules defining what it names (itself and roots left out).
    fn imports(&self) -> BTreeMap<Module, BTreeSet<Module>> {
        let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
        for (m, c) in &self.code {
            let named = use_statements(c)
                .into_iter()
                .filter(|(_, public)| !public)
                .map(|(p, _)| split_alias(&p).0.to_string())
                .chain(inline_paths(c));
            for p in named {
                let Some(abs) = self.absolute(m, &p) else {
                    continue;
                };
                let d = self.defining(&abs, 0);
                let root = d.is_empty() || d == [BIN];
                if &d != m && !root {
                    edges.entry(m.clone()).or_default().insert(d);
                }
            }
        }
        edges
    }
}

fn defines(code: &str, name: &str) -> bool {
    ["fn", "struct", "enum", "const", "type", "trait", "static"]
        .iter()
        .any(|kw| code.contains(&format!("{kw} {name}")))
}

/// The module a file under src/ holds (lib modules from lib.rs, the binary's from main.rs).
fn module_of(path: &str) -> Option<Module> {
    let path = path.strip_suffix(".rs")?;
    let mut segs: Module = path.split('/').map(String::from).collect();
    if segs.last().is_some_and(|s| s == "mod") {
        segs.pop();
    }
    match segs.first().map(String::as_str) {
        Some("lib") if segs.len() == 1 => Some(vec![]),
        Some("main") if segs.len() == 1 => Some(vec![BIN.to_string()]),
        _ => Some(segs),
    }
}

fn room(m: &Module) -> Option<&str> {
    match m.first().map(String::as_str) {
        Some(BIN) => Some("cli"),
        other => other,
    }
}

fn rank(room: &str) -> Option<usize> {
    ROOMS.iter().position(|r| r.contains(&room))
}

/// `model`'s floor of a module in it (its mod.rs only re-exports: none).
fn floor(m: &Module) -> Option<usize> {
    let f = m.get(1)?;
    MODEL_FLOORS.iter().position(|x| x == f)
}

fn show(m: &Module) -> String {
    match m.first().map(String::as_str) {
        Some(BIN) => m[1..].join("/"),
        _ => m.join("/"),
    }
}

/// Every fault: imports up the order, rooms left out of it, and circles.
fn faults(tree: &Tree) -> Vec<String> {
    let edges = tree.imports();
    let mut out = Vec::new();
    for (a, targets) in &edges {
        for b in targets {
            let (ra, rb) = (room(a).unwrap_or(""), room(b).unwrap_or(""));
            let (Some(ka), Some(kb)) = (rank(ra), rank(rb)) else {
                out.push(format!(
                    "{} -> {}: a room missing from ROOMS",
                    show(a),
                    show(b)
                ));
                continue;
            };
            if ra != rb && kb <= ka {
                out.push(format!(
                    "{} imports {} (room {rb} is not below {ra})",
                    show(a),
                    show(b)
                ));
            }
            if ra == "model" && rb == "model" {
                if let (Some(fa), Some(fb)) = (floor(a), floor(b)) {
                    if fb < fa {
                        out.push(format!("{} imports {} (a floor above)", show(a), show(b)));
                    }
                }
            }
        }
    }
    for circle in circles(&edges) {
        let names: Vec<String> = circle.iter().map(show).collect();
        let inside: Vec<String> = circle
            .iter()
            .flat_map(|a| {
                let to = edges[a].iter().filter(|b| circle.contains(b));
                to.map(move |b| format!("{} -> {}", show(a), show(b)))
            })
            .collect();
        out.push(format!(
            "files import each other: {} ({})",
            names.join(", "),
            inside.join("; ")
        ));
    }
    out
}

/// The strongly connected components of more than one module (Tarjan's algorithm).
fn circles(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    struct State<'a> {
        edges: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: HashMap<&'a Module, usize>,
        low: HashMap<&'a Module, usize>,
        stack: Vec<&'a Module>,
        on: BTreeSet<&'a Module>,
        found: Vec<Vec<Module>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a Module) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on.insert(v);
        for w in s.edges.get(v).into_iter().flatten() {
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                s.low.insert(v, s.low[v].min(lw));
            } else if s.on.contains(w) {
                let iw = s.index[w];
                s.low.insert(v, s.low[v].min(iw));
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            loop {
                let w = s.stack.pop().expect("on the stack");
                s.on.remove(w);
                comp.push(w.clone());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                s.found.push(comp);
            }
        }
    }
    let mut s = State {
        edges,
        index: HashMap::new(),
        low: HashMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.found
}

fn read_src(dir: &Path, root: &Path, out: &mut Vec<(String, String)>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            read_src(&p, root, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            let rel = p
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            out.push((rel, std::fs::read_to_string(&p).unwrap()));
        }
    }
}

#[test]
fn imports_point_down_and_no_files_import_each_other() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    read_src(&src, &src, &mut files);
    let tree = Tree::new(&files);
    let edges: usize = tree.imports().values().map(BTreeSet::len).sum();
    // the reading found the crate's imports (an empty reading would pass anything)
    assert!(
        edges > 300,
        "only {edges} imports read from {}",
        src.display()
    );
    let faults = faults(&tree);
    assert!(
        faults.is_empty(),
        "{} faults:\n{}",
        faults.len(),
        faults.join("\n")
    );
}

/// docs/architecture.md's size rule: one concept a file, none over 400 lines (tests in src/
/// included; the integration tests under tests/ are outside the rule).
#[test]
fn no_source_file_is_over_400_lines() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    read_src(&src, &src, &mut files);
    assert!(files.len() > 200, "only {} files read", files.len());
    let long: Vec<String> = files
        .iter()
        .map(|(name, code)| (name, code.lines().count()))
        .filter(|(_, n)| *n > 400)
        .map(|(name, n)| format!("src/{name}: {n} lines"))
        .collect();
    assert!(long.is_empty(), "over 400 lines:\n{}", long.join("\n"));
}

#[test]
fn the_checker_finds_an_upward_import_a_floor_breach_and_a_circle() {
    let file = |p: &str, s: &str| (p.to_string(), s.to_string());
    let files = vec![
        file("lib.rs", "pub mod data; pub mod eval; pub mod model;"),
        file("data/mod.rs", "mod a; mod b; pub use a::Row;"),
        // a and b import each other, b through its parent's re-export
        file("data/a.rs", "use super::b::parse; pub struct Row;"),
        file("data/b.rs", "use super::Row; pub fn parse() {}"),
        // data is below eval: this import points up
        file("data/c.rs", "fn f() { crate::eval::score(); }"),
        file(
            "eval/mod.rs",
            "use crate::data::{self, Row}; pub fn score() {}",
        ),
        file("model/mod.rs", "pub mod kernels; pub mod layers;"),
        file("model/kernels/mod.rs", "use crate::model::layers::Bert;"),
        file("model/layers/mod.rs", "pub struct Bert;"),
    ];
    let faults = faults(&Tree::new(&files));
    let has = |s: &str| faults.iter().any(|f| f.contains(s));
    assert!(has("data/c imports eval"), "{faults:?}");
    assert!(
        has("model/kernels imports model/layers (a floor above)"),
        "{faults:?}"
    );
    assert!(has("files import each other: data/a, data/b"), "{faults:?}");
    // eval -> data points down and is no fault
    assert_eq!(faults.len(), 3, "{faults:?}");
}
