//! Writes that fail lose nothing: a write stopped by a file-size limit (`ulimit -f`) or a kill
//! leaves the earlier output at the same path byte for byte, says what failed in words (not a
//! death by signal: the binary ignores SIGXFSZ, so the write returns an error naming the file),
//! and leaves no half-written file where the output belongs: encode, search, index and a
//! training checkpoint, each over an output of its own from a smaller run.
mod common;
use std::path::{Path, PathBuf};
use std::process::Output;

/// `sh -c "ulimit -f BLOCKS; exec condenser ARGS"` (BLOCKS of 512 bytes: POSIX sh's unit).
fn limited(blocks: u64, args: &[String]) -> Output {
    let bin = env!("CARGO_BIN_EXE_condenser");
    let quoted: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
    std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -f {blocks} && exec '{bin}' {}",
            quoted.join(" ")
        ))
        .output()
        .unwrap()
}

fn run(args: &[String]) {
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = common::condenser(&refs);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

/// Every file under `dir`, with its bytes.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(snapshot(&p));
        } else {
            out.push((p.clone(), std::fs::read(&p).unwrap()));
        }
    }
    out.sort();
    out
}

/// Run `args` under a limit of `blocks`: it must fail naming `what`, leave `keep` (a file or a
/// folder) as it was, and leave no temporary file beside it.
fn fails_keeping(blocks: u64, args: &[String], what: &str, keep: &Path) {
    let before = snapshot(keep.parent().unwrap());
    let o = limited(blocks, args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}: killed by a signal, or succeeded: {err}",
        args[0]
    );
    assert!(
        err.contains(what) && err.to_lowercase().contains("file too large"),
        "{err}"
    );
    let after = snapshot(keep.parent().unwrap());
    let names = |s: &[(PathBuf, Vec<u8>)]| s.iter().map(|x| x.0.clone()).collect::<Vec<_>>();
    assert_eq!(
        names(&after),
        names(&before),
        "{}: files came or went",
        args[0]
    );
    assert!(after == before, "{}: an earlier output changed", args[0]);
}

#[test]
fn writes_stopped_by_a_file_size_limit_keep_the_earlier_output() {
    let d = tempfile::tempdir().unwrap();
    let out = |n: &str| d.path().join(n).to_str().unwrap().to_string();
    let model = common::model().to_str().unwrap().to_string();
    let data = |n: &str| common::data(n).to_str().unwrap().to_string();
    let encode = |input: &str, dest: &str| {
        s(&[
            "encode",
            "--model",
            &model,
            "--input",
            input,
            "--max-seq-length",
            "32",
            "--out",
            dest,
        ])
    };
    // encode: stsb test's sentences (~2 MB), then cranfield's corpus over it under 256 KB
    let emb = out("store/emb.parquet");
    let mut small = encode(&data("stsb/test.parquet"), &emb);
    small.extend(s(&["--columns", "sentence1"]));
    run(&small);
    fails_keeping(
        512,
        &encode(&data("cranfield"), &emb),
        "emb.parquet",
        Path::new(&emb),
    );
    // index: an IVF of that store (~1 MB), then one of a bigger store over it under 512 KB
    let corpus = out("big/corpus.parquet");
    run(&encode(&data("cranfield"), &corpus));
    let ivf = out("index/x.ivf");
    run(&s(&["index", "--corpus-embeddings", &emb, "--out", &ivf]));
    let big_ivf = s(&["index", "--corpus-embeddings", &corpus, "--out", &ivf]);
    fails_keeping(1024, &big_ivf, "x.ivf", Path::new(&ivf));
    // search: the top 10, then the top 500 over it under 256 KB
    let run_file = out("runs/run.parquet");
    let search = |k: &str| {
        s(&[
            "search",
            "--corpus-embeddings",
            &corpus,
            "--model",
            &model,
            "--queries",
            &data("cranfield"),
            "--max-seq-length",
            "32",
            "--top-k",
            k,
            "--out",
            &run_file,
        ])
    };
    run(&search("10"));
    fails_keeping(512, &search("500"), "run.parquet", Path::new(&run_file));
}

/// A training run whose next checkpoint cannot be written stops, naming the file, and keeps the
/// last checkpoint whole: it still resumes.
#[test]
fn a_checkpoint_that_cannot_be_written_keeps_the_last_one() {
    let d = tempfile::tempdir().unwrap();
    let tiny = common::tiny_bert(d.path());
    let out = d.path().join("run/bi");
    let train = |steps: &str, resume: bool| {
        let mut a = s(&[
            "train-biencoder",
            "--init",
            tiny.to_str().unwrap(),
            "--train",
        ]);
        a.extend(s(&[
            common::data("stsb/dev.parquet").to_str().unwrap(),
            "--loss",
            "cosine",
        ]));
        a.extend(s(&["--max-steps", steps, "--checkpoint-steps", "1"]));
        a.extend(s(&["--out", out.to_str().unwrap()]));
        if resume {
            a.push("--resume".into());
        }
        a
    };
    // killed once its first checkpoint is written, then resumed under a limit the tiny model's
    // weights (~1 MB) exceed: the next checkpoint fails, the first stays whole and still resumes
    let mut first = std::process::Command::new(env!("CARGO_BIN_EXE_condenser"));
    first.args(train("400", false));
    common::kill_after_checkpoint(first, &out, 1);
    fails_keeping(
        1024,
        &train("400", true),
        "safetensors",
        &out.join("checkpoint"),
    );
    let mut again = std::process::Command::new(env!("CARGO_BIN_EXE_condenser"));
    again.args(train("400", true));
    assert!(
        common::kill_after_checkpoint(again, &out, 2) >= 2,
        "did not resume"
    );
}

/// A write killed before it finishes leaves the earlier output as it was: outputs are written to
/// a temporary file and renamed into place only when whole.
#[test]
fn a_killed_write_keeps_the_earlier_output() {
    let d = tempfile::tempdir().unwrap();
    let emb = d.path().join("emb.parquet");
    let model = common::model();
    let encode = |input: &str| {
        let input = common::data(input);
        std::process::Command::new(env!("CARGO_BIN_EXE_condenser"))
            .args(["encode", "--model", model.to_str().unwrap(), "--input"])
            .args([input.to_str().unwrap(), "--columns", "sentence1"])
            .args(["--out", emb.to_str().unwrap()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    assert!(encode("stsb/test.parquet").wait().unwrap().success());
    let before = std::fs::read(&emb).unwrap();
    for wait_ms in [500, 3000] {
        let mut child = encode("stsb/train.parquet");
        std::thread::sleep(std::time::Duration::from_millis(wait_ms));
        child.kill().unwrap();
        assert!(
            !child.wait().unwrap().success(),
            "finished within {wait_ms} ms"
        );
        assert_eq!(
            std::fs::read(&emb).unwrap(),
            before,
            "killed after {wait_ms} ms"
        );
    }
}
