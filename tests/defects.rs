//! The defects a new user hit (issue 13), one test each; every one of these failed on the code
//! before its fix. Recipe input tracking and `pretrain --model`'s fresh head are tested beside
//! their features (tests/recipe.rs, tests/pretrain.rs).
mod common;
use common::condenser;
use std::path::Path;

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A small cosine-loss bi-encoder run from `init` on STSb dev into `out`.
fn train_cosine(init: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    let stsb = common::data("stsb/dev.parquet");
    let mut a = vec!["train-biencoder", "--init", s(init), "--train", s(&stsb)];
    a.extend([
        "--loss",
        "cosine",
        "--out",
        s(out),
        "--max-seq-length",
        "32",
        "--seed",
        "3",
    ]);
    a.extend(extra);
    condenser(&a)
}

/// Defect 1: `--eval-steps 0` divided by zero in the trainer (a panic); it is refused up front.
#[test]
fn zero_eval_steps_is_a_clear_error() {
    let d = tempfile::tempdir().unwrap();
    let tiny = common::tiny_bert(d.path());
    let stsb = common::data("stsb/dev.parquet");
    let out = d.path().join("bi");
    let o = condenser(&[
        "train-biencoder",
        "--init",
        s(&tiny),
        "--train",
        s(&stsb),
        "--dev",
        s(&stsb),
        "--loss",
        "cosine",
        "--out",
        s(&out),
        "--max-steps",
        "2",
        "--eval-steps",
        "0",
    ]);
    let e = stderr(&o);
    assert!(!o.status.success() && !e.contains("panicked"), "{e}");
    assert!(e.contains("--eval-steps") && e.contains('0'), "{e}");
    assert!(!out.exists(), "nothing written");
}

/// The tiny BERT with every tensor name prefixed, as some exporters write them.
fn prefixed_copy(tiny: &Path, dir: &Path) -> std::path::PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    for f in ["config.json", "tokenizer.json"] {
        std::fs::copy(tiny.join(f), dir.join(f)).unwrap();
    }
    let w =
        candle_core::safetensors::load(tiny.join("model.safetensors"), &candle_core::Device::Cpu)
            .unwrap();
    let renamed: Vec<(String, candle_core::Tensor)> = w
        .into_iter()
        .map(|(k, v)| (format!("model.{k}"), v))
        .collect();
    safetensors::serialize_to_file(
        renamed.iter().map(|(k, v)| (k.as_str(), v)),
        None,
        &dir.join("model.safetensors"),
    )
    .unwrap();
    dir.to_path_buf()
}

/// Defect 2: a checkpoint whose tensor names do not fit trained from random weights without a
/// word; every training command now refuses it naming the missing tensors, and only task heads
/// start fresh, which the run says.
#[test]
fn unreadable_checkpoint_is_refused_and_fresh_heads_are_named() {
    let d = tempfile::tempdir().unwrap();
    let tiny = common::tiny_bert(d.path());
    let bad = prefixed_copy(&tiny, &d.path().join("prefixed"));
    let stsb = common::data("stsb/dev.parquet");
    let runs: [Vec<&str>; 2] = [
        vec!["train-biencoder", "--init", s(&bad), "--loss", "cosine"],
        vec!["train-cross-encoder", "--model", s(&bad)],
    ];
    for (i, run) in runs.iter().enumerate() {
        let out = d.path().join(format!("out{i}"));
        let mut args = run.clone();
        args.extend(["--train", s(&stsb), "--out", s(&out), "--max-steps", "1"]);
        let o = condenser(&args);
        let e = stderr(&o);
        assert!(
            !o.status.success(),
            "{}: trained from a checkpoint it cannot read",
            run[0]
        );
        assert!(
            e.contains("model.safetensors")
                && e.contains("the checkpoint lacks 37 of the model's tensors")
                && e.contains("embeddings.LayerNorm.bias")
                && e.contains("named like model.embeddings"),
            "{e}"
        );
        assert!(!out.join("model.safetensors").exists());
    }
    // the cross-encoder's classifier and pooler are all that may start fresh, and it is said
    let out = d.path().join("ce");
    let o = condenser(&[
        "train-cross-encoder",
        "--model",
        s(&tiny),
        "--train",
        s(&stsb),
        "--out",
        s(&out),
        "--max-steps",
        "1",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let t = stdout(&o);
    assert!(
        t.contains("initialised fresh")
            && t.contains("classifier.weight")
            && t.contains("bert.pooler.dense.weight"),
        "{t}"
    );
    assert!(!t.contains("encoder.layer"), "{t}");
}

/// Defect 3: A label column the file lacks (a typo) turned gold data into unlabelled target data.
#[test]
fn augment_refuses_a_missing_label_column_unless_unlabeled() {
    let d = tempfile::tempdir().unwrap();
    let ce = common::cross_encoder(d.path());
    let input = d.path().join("in.csv");
    std::fs::write(
        &input,
        "sentence1,sentence2,label\nA man plays a guitar.,A man plays music.,0.9\nThe cat sleeps.,A dog barks.,0.1\n",
    )
    .unwrap();
    let out = d.path().join("aug.parquet");
    let base = [
        "augment",
        "--cross-encoder",
        s(&ce),
        "--input",
        s(&input),
        "--out",
        s(&out),
    ];
    let mut args = base.to_vec();
    args.extend(["--columns", "sentence1,sentence2,lable"]);
    let o = condenser(&args);
    let e = stderr(&o);
    assert!(!o.status.success(), "relabelled gold data as target");
    assert!(
        e.contains("in.csv") && e.contains("'lable'") && e.contains("--unlabeled"),
        "{e}"
    );
    assert!(!out.exists());
    args.push("--unlabeled");
    let o = condenser(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("0 gold, 2 target"), "{}", stdout(&o));
}

fn log_rows(out: &Path) -> String {
    common::train_log_untimed(out)
}

/// Defect 5: The block cache was reused whatever the corpus; it is keyed by corpus, column, tokenizer
/// and length.
#[test]
fn pretrain_block_cache_follows_its_corpus() {
    let d = tempfile::tempdir().unwrap();
    let tiny = common::tiny_bert(d.path());
    let out = d.path().join("c");
    let blocks = |corpus: &Path, out: &Path| -> String {
        let o = condenser(&[
            "pretrain",
            "--model",
            s(&tiny),
            "--corpus",
            s(corpus),
            "--out",
            s(out),
            "--max-steps",
            "1",
            "--max-seq-length",
            "32",
            // the same folder again: its block cache is what is under test
            "--overwrite",
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let t = stdout(&o);
        t.lines()
            .find(|l| l.starts_with("corpus:"))
            .unwrap()
            .to_string()
    };
    let (a, b) = (
        common::data("wikitext2/valid.parquet"),
        common::brown("news"),
    );
    let first = blocks(&a, &out);
    assert!(first.contains("tokenized now"), "{first}");
    assert!(blocks(&a, &out).contains("cached"));
    let other = blocks(&b, &out);
    let alone = blocks(&b, &d.path().join("c2"));
    assert!(
        other.contains("tokenized now"),
        "the old corpus's blocks were reused: {other}"
    );
    assert_eq!(other.replace("cached", "tokenized now"), alone);
    assert_ne!(first, other);
    assert_eq!(
        std::fs::read_dir(&out)
            .unwrap()
            .filter(|e| e
                .as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".u32"))
            .count(),
        1,
        "the stale cache is removed"
    );
}

/// Defect 6: `--resume` with other settings mixed two schedules (and rewrote a finished run); the
/// checkpoint records the settings and a mismatch names the flag.
#[test]
fn resume_with_other_settings_names_the_flag() {
    let d = tempfile::tempdir().unwrap();
    let tiny = common::tiny_bert(d.path());
    let out = d.path().join("bi");
    let train = |extra: &[&str]| train_cosine(&tiny, &out, extra);
    // kept, so the settings can be checked against it (a finished run drops it by default)
    assert!(
        train(&["--max-steps", "4", "--batch-size", "8", "--keep-checkpoint"])
            .status
            .success()
    );
    let saved = std::fs::read(out.join("model.safetensors")).unwrap();
    let o = train(&["--max-steps", "6", "--batch-size", "16", "--resume"]);
    let e = stderr(&o);
    assert!(!o.status.success(), "{}", stdout(&o));
    assert!(
        e.contains("--batch-size") && e.contains("8") && e.contains("16"),
        "{e}"
    );
    let o = train(&["--max-steps", "6", "--batch-size", "8", "--resume"]);
    assert!(stderr(&o).contains("--max-steps"), "{}", stderr(&o));
    assert_eq!(
        std::fs::read(out.join("model.safetensors")).unwrap(),
        saved,
        "output rewritten"
    );
    // the same settings: nothing left to do, said so
    let o = train(&["--max-steps", "4", "--batch-size", "8", "--resume"]);
    assert!(
        o.status.success() && stdout(&o).contains("already finished"),
        "{}",
        stdout(&o)
    );
    // a finished run without its checkpoint: nothing to continue, and it says the settings of
    // the call were not compared (nothing to compare them with), the model untouched
    let plain = d.path().join("plain");
    assert!(
        train_cosine(&tiny, &plain, &["--max-steps", "4", "--batch-size", "8"])
            .status
            .success()
    );
    assert!(!plain.join("checkpoint").exists() && plain.join("README.md").is_file());
    let before = std::fs::read(plain.join("model.safetensors")).unwrap();
    let o = train_cosine(&tiny, &plain, &["--max-steps", "6", "--resume"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("already finished") && stdout(&o).contains("were not compared"),
        "{}",
        stdout(&o)
    );
    assert_eq!(
        std::fs::read(plain.join("model.safetensors")).unwrap(),
        before
    );
}

/// Defect 7: config.json's dropout rates were parsed and ignored (0.1 always); they are the default now
/// and `--dropout` overrides them.
#[test]
fn dropout_comes_from_config_json() {
    let d = tempfile::tempdir().unwrap();
    let tiny = common::tiny_bert(d.path());
    let cfg = tiny.join("config.json");
    let mut c: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&cfg).unwrap()).unwrap();
    c["hidden_dropout_prob"] = 0.0.into();
    c["attention_probs_dropout_prob"] = 0.0.into();
    std::fs::write(&cfg, c.to_string()).unwrap();
    let train = |name: &str, extra: &[&str]| {
        let out = d.path().join(name);
        let mut a = vec!["--max-steps", "5", "--threads", "1"];
        a.extend(extra);
        let o = train_cosine(&tiny, &out, &a);
        assert!(o.status.success(), "{}", stderr(&o));
        log_rows(&out)
    };
    let from_config = train("a", &[]);
    assert_eq!(
        from_config,
        train("b", &["--dropout", "0"]),
        "config's 0 dropout ignored"
    );
    assert_ne!(
        from_config,
        train("c", &["--dropout", "0.1"]),
        "--dropout ignored"
    );
}

/// Defect 8: An unknown extension was read as plain text ("invalid UTF-8 at line 1"); it is the same
/// unknown-extension error as every reader's, and plain text is `.txt`.
#[test]
fn similarity_refuses_an_unknown_extension() {
    let d = tempfile::tempdir().unwrap();
    let tiny = common::tiny_bert(d.path());
    let typo = d.path().join("x.parqet");
    std::fs::copy(common::data("stsb/dev.parquet"), &typo).unwrap();
    let out = d.path().join("sim");
    let o = condenser(&[
        "similarity",
        "--model",
        s(&tiny),
        "--file",
        s(&typo),
        "--out",
        s(&out),
    ]);
    let e = stderr(&o);
    assert!(!o.status.success());
    assert!(
        e.contains("x.parqet") && e.contains("unknown extension 'parqet'") && e.contains(".txt"),
        "{e}"
    );
    let txt = d.path().join("x.txt");
    std::fs::write(&txt, "A cat sits.\n\nA dog runs.\n").unwrap();
    let o = condenser(&[
        "similarity",
        "--model",
        s(&tiny),
        "--file",
        s(&txt),
        "--out",
        s(&out),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("2: A dog runs."), "{}", stdout(&o));
}

/// Defect 10: `pretrain`'s export dropped the starting model's pooler, so transformers (and a
/// cross-encoder started from it) got a random one; it is carried over.
#[test]
fn pretrain_export_keeps_the_pooler() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("c");
    let model = common::model();
    let o = condenser(&[
        "pretrain",
        "--model",
        s(&model),
        "--corpus",
        s(&common::brown("news")),
        "--out",
        s(&out),
        "--max-steps",
        "1",
        "--max-seq-length",
        "32",
        "--batch-size",
        "2",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let load = |p: &Path| {
        candle_core::safetensors::load(p.join("model.safetensors"), &candle_core::Device::Cpu)
            .unwrap()
    };
    let (theirs, ours) = (load(&model), load(&out));
    for k in ["pooler.dense.weight", "pooler.dense.bias"] {
        let a = theirs[k].flatten_all().unwrap().to_vec1::<f32>().unwrap();
        let b = ours
            .get(k)
            .unwrap_or_else(|| panic!("{k} dropped"))
            .flatten_all()
            .unwrap();
        assert_eq!(a, b.to_vec1::<f32>().unwrap(), "{k}");
    }
}

/// A log (stderr not a terminal: a Slurm job, nohup, CI) sees a training's progress as plain
/// lines; indicatif alone draws nothing there, so a long run's log stayed silent to its end.
#[test]
fn a_log_shows_a_trainings_progress() {
    let d = tempfile::tempdir().unwrap();
    let tiny = common::tiny_bert(d.path());
    let o = train_cosine(&tiny, &d.path().join("bi"), &["--max-steps", "2"]);
    let e = stderr(&o);
    assert!(o.status.success(), "{e}");
    // the bar's first state, a line of its own with the run's length
    let line = |l: &str| l.starts_with("progress: ") && l.contains("/2 steps");
    assert!(e.lines().any(line), "{e}");
}
