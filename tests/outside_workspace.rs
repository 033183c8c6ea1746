//! condenser outside this workspace (issue 56): a clone with no ../shared beside it gets its data
//! from a mirror that datasets/mirror.sh lays out, served here by Python's http.server on
//! localhost, every file checked against datasets/manifest.sha256; installed models are named
//! from any folder.
mod common;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

/// A static server over `dir` on a free localhost port, stopped when dropped.
struct Server {
    child: Child,
    url: String,
}

impl Server {
    fn start(dir: &Path) -> Server {
        let mut child = Command::new("python3")
            .args([
                "-u",
                "-m",
                "http.server",
                "0",
                "--bind",
                "127.0.0.1",
                "--directory",
            ])
            .arg(dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 runs");
        // "Serving HTTP on 127.0.0.1 port 39347 (http://127.0.0.1:39347/) ..."
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .split_whitespace()
            .skip_while(|w| *w != "port")
            .nth(1)
            .unwrap_or_else(|| panic!("no port in {line:?}"));
        Server {
            child,
            url: format!("http://127.0.0.1:{port}"),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `bash datasets/fetch.sh data` in `clone`, with no ../shared and the mirror `mirror` (if any).
fn fetch_data(clone: &Path, mirror: Option<&str>) -> Output {
    let mut c = Command::new("bash");
    c.args(["datasets/fetch.sh", "data"])
        .current_dir(clone)
        .env_remove("CONDENSER_SHARED")
        .env_remove("CONDENSER_DATA_MIRROR");
    if let Some(m) = mirror {
        c.env("CONDENSER_DATA_MIRROR", m);
    }
    c.output().unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The manifest's relative paths.
fn manifest(root: &Path) -> Vec<String> {
    std::fs::read_to_string(root.join("datasets/manifest.sha256"))
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().nth(1).unwrap().to_string())
        .collect()
}

/// A clone of this repository in `dir/clone`, its data scripts as in the working tree (what is
/// tested is what is about to be committed).
fn clone(dir: &Path) -> PathBuf {
    let clone = dir.join("clone");
    let o = Command::new("git")
        .args(["clone", "-q"])
        .arg(common::root())
        .arg(&clone)
        .output()
        .unwrap();
    assert!(o.status.success(), "git clone: {}", text(&o));
    for f in ["fetch.sh", "mirror.sh", "manifest.sha256"] {
        std::fs::copy(
            common::root().join("datasets").join(f),
            clone.join("datasets").join(f),
        )
        .unwrap();
    }
    clone
}

#[test]
fn a_clone_elsewhere_fetches_the_data_from_a_mirror_and_runs_the_main_job() {
    let dir = tempfile::tempdir().unwrap();
    let root = common::root();
    let files = manifest(&root);
    assert!(
        files.len() >= 24,
        "the manifest names every data set's files"
    );

    // the mirror, laid out from this checkout's (linked) data
    let mirror = dir.path().join("mirror");
    let o = Command::new("bash")
        .arg(root.join("datasets/mirror.sh"))
        .arg(&mirror)
        .output()
        .unwrap();
    assert!(o.status.success(), "mirror.sh: {}", text(&o));
    assert!(mirror.join("manifest.sha256").is_file());

    let clone = clone(dir.path());
    assert!(!dir.path().join("shared").exists());

    // neither ../shared nor a mirror: one message naming the variable to set
    let o = fetch_data(&clone, None);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("CONDENSER_DATA_MIRROR=URL"),
        "{}",
        text(&o)
    );

    let server = Server::start(&mirror);
    let o = fetch_data(&clone, Some(&server.url));
    assert!(o.status.success(), "fetch from the mirror: {}", text(&o));
    for rel in &files {
        let got = clone.join("datasets/data").join(rel);
        let meta = std::fs::symlink_metadata(&got).unwrap();
        assert!(meta.file_type().is_file(), "{rel} is a real file");
        assert_eq!(
            std::fs::read(&got).unwrap(),
            std::fs::read(root.join("datasets/data").join(rel)).unwrap(),
            "{rel}: the same bytes as ../shared"
        );
    }

    // a second fetch finds every file whole and downloads nothing (a dead mirror would fail it)
    let o = fetch_data(&clone, Some("http://127.0.0.1:9"));
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains(&format!("0 files fetched, {} already there", files.len())),
        "{}",
        text(&o)
    );

    // a mirror file that is not the manifest's: refused, and nothing partial is left
    let bad = "stsb/dev.parquet";
    let mut bytes = std::fs::read(mirror.join(bad)).unwrap();
    bytes.truncate(bytes.len() / 2);
    std::fs::write(mirror.join(bad), bytes).unwrap();
    std::fs::remove_file(clone.join("datasets/data").join(bad)).unwrap();
    let o = fetch_data(&clone, Some(&server.url));
    assert!(!o.status.success());
    assert!(text(&o).contains("SHA-256"), "{}", text(&o));
    assert!(text(&o).contains(bad), "{}", text(&o));
    let left: Vec<_> = std::fs::read_dir(clone.join("datasets/data/stsb"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !left.iter().any(|n| n.contains("dev")),
        "no partial file: {left:?}"
    );
    drop(server);
    std::fs::copy(
        root.join("datasets/data").join(bad),
        clone.join("datasets/data").join(bad),
    )
    .unwrap();

    // README's main job plans from the clone: models by name from the data home, data fetched
    let o = Command::new(env!("CARGO_BIN_EXE_condenser"))
        .args(["run", "recipes/augsbert-indomain.toml", "--dry-run"])
        .current_dir(&clone)
        .output()
        .unwrap();
    assert!(o.status.success(), "dry run: {}", text(&o));
    assert!(!text(&o).contains("warning"), "{}", text(&o));
    assert!(text(&o).contains("[6/6]"), "{}", text(&o));
}

#[test]
fn an_installed_model_is_named_from_any_folder() {
    common::model(); // installed by datasets/fetch.sh
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.csv");
    std::fs::write(&input, "text\na sentence to embed\nanother one\n").unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_condenser"))
        .args(["encode", "--model", "all-MiniLM-L6-v2", "--input", "in.csv"])
        .args(["--out", "out.parquet"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("wrote 2 rows with 384 embeddings"));

    // evaluate writes the model as it was named, not as ~/.cache/...: results.csv reads the same
    // from any machine (and the transfer grid's report finds the zero-shot model by its name)
    std::fs::write(
        dir.path().join("pairs.csv"),
        "sentence1,sentence2,label\na cat sits,a cat is sitting,0.9\na dog runs,the market fell,0.1\nrain today,it rains today,0.8\n",
    )
    .unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_condenser"))
        .args([
            "evaluate",
            "--model",
            "all-MiniLM-L6-v2",
            "--sts",
            "tiny=pairs.csv",
        ])
        .args(["--out", "eval"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let csv = std::fs::read_to_string(dir.path().join("eval/results.csv")).unwrap();
    let models: Vec<&str> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').next().unwrap())
        .collect();
    assert!(
        !models.is_empty() && models.iter().all(|m| *m == "all-MiniLM-L6-v2"),
        "{csv}"
    );

    // an unknown name lists the installed ones and says how to fetch; a shard names it the same
    // way (its settings fingerprint the model only once it is found)
    for shard in [&[][..], &["--shard", "0/2"]] {
        let o = Command::new(env!("CARGO_BIN_EXE_condenser"))
            .args([
                "encode",
                "--model",
                "all-MiniLM-L12-v9",
                "--input",
                "in.csv",
            ])
            .args(["--out", "out2.parquet"])
            .args(shard)
            .current_dir(dir.path())
            .output()
            .unwrap();
        let e = common::err(o);
        assert!(e.contains("all-MiniLM-L12-v9"), "{e}");
        assert!(
            e.contains("installed: ") && e.contains("all-MiniLM-L6-v2"),
            "{e}"
        );
        assert!(e.contains("datasets/fetch.sh"), "{e}");
        assert!(!dir.path().join("out2.parquet").exists());
    }
}

#[test]
fn a_trained_folder_has_a_card_and_no_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let tiny = common::tiny_bert(dir.path());
    let stsb = common::data("stsb/dev.parquet");
    let train = |out: &Path, extra: &[&str]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_condenser"));
        c.args(["train-biencoder", "--init"])
            .arg(&tiny)
            .arg("--train")
            .arg(&stsb)
            .arg("--dev")
            .arg(&stsb)
            .args(["--loss", "cosine", "--max-steps", "2", "--batch-size", "8"])
            .args(["--max-seq-length", "32", "--out"])
            .arg(out)
            .args(extra);
        let o = c.output().unwrap();
        assert!(o.status.success(), "{}", text(&o));
        o
    };
    let out = dir.path().join("bi");
    let o = train(&out, &[]);
    assert!(text(&o).contains("checkpoint/ removed"), "{}", text(&o));
    assert!(!out.join("checkpoint").exists());
    for f in [
        "model.safetensors",
        "modules.json",
        "train_log.csv",
        "README.md",
    ] {
        assert!(out.join(f).is_file(), "{f}");
    }
    let card = std::fs::read_to_string(out.join("README.md")).unwrap();
    let sum = Command::new("sha256sum").arg(&stsb).output().unwrap();
    let sum = String::from_utf8_lossy(&sum.stdout);
    let sum = sum.split_whitespace().next().unwrap();
    for want in [
        "library_name: sentence-transformers",
        &format!("base_model: {}", tiny.display()),
        "condenser train-biencoder --init",
        "| train | ",
        "| 1500 | sentence1, sentence2, score, label | ",
        sum,
        "- **Loss:** cosine",
        "| batch size | 8 |",
        "dev spearman_cosine",
        "SentenceTransformer(",
        "condenser encode --model",
        "- **Hardware:** CPU: ",
    ] {
        assert!(card.contains(want), "card lacks {want:?}:\n{card}");
    }
    // the dev figure on the card is the run's own
    let best = text(&o)
        .split("best dev spearman_cosine ")
        .nth(1)
        .and_then(|t| t.split_whitespace().next().map(str::to_string))
        .unwrap();
    assert!(card.contains(&format!("| {best} |")), "{best}:\n{card}");

    let kept = dir.path().join("kept");
    let o = train(&kept, &["--keep-checkpoint"]);
    assert!(text(&o).contains("checkpoint/ kept"), "{}", text(&o));
    assert!(kept.join("checkpoint/state.json").is_file());

    // a cross-encoder's card says how to load a CrossEncoder
    let ce_dir = dir.path().join("ce-run");
    std::fs::create_dir(&ce_dir).unwrap();
    let ce = common::cross_encoder(&ce_dir);
    let card = std::fs::read_to_string(ce.join("README.md")).unwrap();
    assert!(
        card.contains("CrossEncoder(") && card.contains("text-ranking"),
        "{card}"
    );
    assert!(!ce.join("checkpoint").exists());
}
