//! The training engine through `train-cross-encoder` on a tiny random BERT: reproducible runs,
//! SIGKILL + --resume equal to an uninterrupted run, a NaN stop that keeps the last good
//! checkpoint, and clear errors for bad labels.
mod common;
use std::path::Path;
use std::process::Command;

fn cmd(model: &Path, out: &Path, lr: &str, extra: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_condenser"));
    c.args([
        "train-cross-encoder",
        "--model",
        model.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    c.args([
        "--train",
        common::data("stsb/train.parquet").to_str().unwrap(),
    ]);
    c.args(["--max-steps", "240", "--lr", lr]);
    c.args(extra);
    c
}

fn weights(p: &Path) -> Vec<(String, Vec<f32>)> {
    let t = candle_core::safetensors::load(p, &candle_core::Device::Cpu).unwrap();
    let mut v: Vec<(String, Vec<f32>)> = t
        .into_iter()
        .map(|(k, x)| (k, x.flatten_all().unwrap().to_vec1().unwrap()))
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

#[test]
fn same_seed_same_weights_and_resume_after_sigkill_is_exact() {
    let d = tempfile::tempdir().unwrap();
    let model = common::tiny_bert(d.path());
    let (a, b, c) = (d.path().join("a"), d.path().join("b"), d.path().join("c"));
    for out in [&a, &b] {
        let o = cmd(&model, out, "1e-3", &["--checkpoint-steps", "20"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let wa = weights(&a.join("model.safetensors"));
    assert_eq!(
        wa,
        weights(&b.join("model.safetensors")),
        "two runs with one seed must agree bit for bit"
    );
    let initial = weights(&model.join("model.safetensors"));
    assert_ne!(
        wa.iter()
            .find(|(k, _)| k.ends_with("word_embeddings.weight"))
            .unwrap()
            .1,
        initial
            .iter()
            .find(|(k, _)| k.ends_with("word_embeddings.weight"))
            .unwrap()
            .1,
        "training changed the weights"
    );

    // kill -9 mid-run, after a checkpoint, then resume
    let killed_at = common::kill_after_checkpoint(
        cmd(&model, &c, "1e-3", &["--checkpoint-steps", "20"]),
        &c,
        60,
    );
    assert!(killed_at < 240, "killed at step {killed_at}");
    let o = cmd(
        &model,
        &c,
        "1e-3",
        &["--checkpoint-steps", "20", "--resume"],
    )
    .output()
    .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        weights(&c.join("model.safetensors")),
        wa,
        "resumed from step {killed_at}: final weights differ"
    );
    let log = std::fs::read_to_string(c.join("train_log.csv")).unwrap();
    assert_eq!(
        log.lines().count(),
        241,
        "one log row per step across the kill"
    );
    assert!(c.join("loss.png").exists() && c.join("loss.svg").exists());
}

#[test]
fn nan_loss_stops_with_a_clear_error_and_keeps_the_checkpoint() {
    let d = tempfile::tempdir().unwrap();
    let model = common::tiny_bert(d.path());
    let out = d.path().join("o");
    // an absurd learning rate blows the weights up until the loss is not finite
    let o = cmd(&model, &out, "1e30", &["--checkpoint-steps", "1"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("training stopped: loss is") && e.contains("last good checkpoint"),
        "{e}"
    );
    let step = common::checkpoint_step(&out);
    let w = weights(&out.join("checkpoint/model.safetensors"));
    assert!(
        step >= 1 && w.iter().all(|(_, v)| v.iter().all(|x| x.is_finite())),
        "checkpoint at step {step} is whole and finite"
    );
}

#[test]
fn bad_labels_are_clear_errors() {
    let d = tempfile::tempdir().unwrap();
    let model = common::tiny_bert(d.path());
    let csv = d.path().join("bad.csv");
    std::fs::write(
        &csv,
        "sentence1,sentence2,label\na b,c d,0.5\ne f,g h,3.2\n",
    )
    .unwrap();
    let run = |extra: &[&str]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_condenser"));
        c.args([
            "train-cross-encoder",
            "--model",
            model.to_str().unwrap(),
            "--out",
            d.path().join("o").to_str().unwrap(),
            "--train",
            csv.to_str().unwrap(),
        ]);
        c.args(extra);
        let o = c.output().unwrap();
        assert!(!o.status.success());
        String::from_utf8_lossy(&o.stderr).to_string()
    };
    let e = run(&[]);
    assert!(
        e.contains("bad.csv: row 2, column 'label': label 3.2: expected a score in [0, 1]"),
        "{e}"
    );
    std::fs::write(&csv, "sentence1,sentence2,label\na b,c d,1\ne f,g h,3\n").unwrap();
    let e = run(&["--num-labels", "3"]);
    assert!(
        e.contains("bad.csv: row 2, column 'label': label 3: expected a class id in 0..3"),
        "{e}"
    );
}

/// Splitting each batch across threads (uneven shards: 16 = 6 + 6 + 4) trains like the whole
/// batch: same step losses (without dropout, whose masks are drawn per shard) and nearly the
/// same weights; only float summation order differs.
#[test]
fn batches_split_across_threads_train_like_whole_batches() {
    let d = tempfile::tempdir().unwrap();
    let model = common::tiny_bert(d.path());
    let run = |threads: &str| {
        let out = d.path().join(format!("t{threads}"));
        let o = cmd(
            &model,
            &out,
            "1e-3",
            &["--dropout", "0", "--threads", threads],
        )
        .output()
        .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let log = std::fs::read_to_string(out.join("train_log.csv")).unwrap();
        let losses: Vec<f64> = log
            .lines()
            .skip(1)
            .map(|l| l.split(',').nth(1).unwrap().parse().unwrap())
            .collect();
        (losses, weights(&out.join("model.safetensors")))
    };
    let (whole, w1) = run("1");
    let (split, w3) = run("3");
    assert_eq!(whole.len(), 240);
    for (step, (a, b)) in whole.iter().zip(&split).enumerate() {
        assert!(
            (a - b).abs() <= 1e-5 * a.abs(),
            "step {}: loss {a} whole vs {b} split",
            step + 1
        );
    }
    let w0 = weights(&model.join("model.safetensors"));
    let (mut moved, mut apart) = (0f32, 0f32);
    for (((_, a), (_, b)), (_, c)) in w1.iter().zip(&w3).zip(&w0) {
        for ((x, y), z) in a.iter().zip(b).zip(c) {
            moved = moved.max((x - z).abs());
            apart = apart.max((x - y).abs());
        }
    }
    assert!(apart < 0.01 * moved, "weights apart {apart}, moved {moved}");
}

/// `--resume` refuses another training file even with the same row count (the checkpoint keeps a
/// fingerprint of the examples' content, not the file's name or size), and another loss.
#[test]
fn resume_refuses_other_data_or_another_loss() {
    let d = tempfile::tempdir().unwrap();
    let tiny = common::tiny_bert(d.path());
    let sample = |seed: &str| {
        let p = d.path().join(format!("stsb-{seed}.parquet"));
        let stsb = common::data("stsb/train.parquet");
        let o = common::condenser(&[
            "convert",
            stsb.to_str().unwrap(),
            p.to_str().unwrap(),
            "--sample",
            "64",
            "--seed",
            seed,
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        p
    };
    let (a, b) = (sample("1"), sample("2"));
    let out = d.path().join("bi");
    let train = |file: &Path, loss: &[&str], resume: bool| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_condenser"));
        c.args(["train-biencoder", "--init", tiny.to_str().unwrap()])
            .args([
                "--train",
                file.to_str().unwrap(),
                "--out",
                out.to_str().unwrap(),
            ])
            .args(loss)
            .args([
                "--epochs",
                "40",
                "--batch-size",
                "8",
                "--checkpoint-steps",
                "2",
            ])
            .args(["--max-seq-length", "32", "--threads", "1"]);
        if resume {
            c.arg("--resume");
        }
        c
    };
    let cosine = ["--loss", "cosine"];
    common::kill_after_checkpoint(train(&a, &cosine, false), &out, 2);
    let err = |c: &mut Command| {
        let o = c.output().unwrap();
        assert!(
            !o.status.success(),
            "resumed: {}",
            String::from_utf8_lossy(&o.stdout)
        );
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let e = err(&mut train(&b, &cosine, true));
    assert!(
        e.contains("training data changed")
            && e.contains("64 examples")
            && e.contains("content differs"),
        "{e}"
    );
    let mnr = ["--loss", "mnr", "--columns", "sentence1,sentence2"];
    let e = err(&mut train(&a, &mnr, true));
    assert!(e.contains("--loss cosine") && e.contains("mnr"), "{e}");
}

/// The summary's four times: the loop's wall, its steps', its evaluations' and its saves'.
fn summary_times(stdout: &str) -> [f64; 4] {
    let num = |after: &str, before: &str| -> f64 {
        let i = stdout
            .find(after)
            .unwrap_or_else(|| panic!("{after}: {stdout}"))
            + after.len();
        let j = stdout[i..].find(before).unwrap() + i;
        stdout[i..j].trim().parse().unwrap()
    };
    [
        num("steps in ", " s ("),
        num(" s (", " s in training steps"),
        num("examples/s; ", " s evaluating"),
        num("s evaluating, ", " s saving"),
    ]
}

/// One clock (issue 80): train_log.csv's step times add up to the summary's time in training
/// steps, and steps, dev evaluations and saves are the loop's whole wall time within 5% (a
/// 2-layer MiniLM, MNR on STSb dev pairs, a dev evaluation every 6 steps).
#[test]
fn the_steps_evaluations_and_saves_are_the_loops_time() {
    let d = tempfile::tempdir().unwrap();
    let model = common::minilm_layers(d.path(), 2);
    let out = d.path().join("bi");
    let dev = common::data("stsb/test.parquet");
    let o = common::condenser(&[
        "train-biencoder",
        "--init",
        model.to_str().unwrap(),
        "--train",
        common::data("stsb/dev.parquet").to_str().unwrap(),
        "--columns",
        "sentence1,sentence2",
        "--loss",
        "mnr",
        "--batch-size",
        "32",
        "--max-seq-length",
        "64",
        "--max-steps",
        "18",
        "--dev",
        dev.to_str().unwrap(),
        "--eval-steps",
        "6",
        "--out",
        out.to_str().unwrap(),
    ]);
    let said = common::ok(o);
    let [wall, steps, eval, save] = summary_times(&said);
    let log = std::fs::read_to_string(out.join("train_log.csv")).unwrap();
    let times: Vec<f64> = log
        .lines()
        .skip(1)
        .map(|l| l.rsplit(',').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(times.len(), 18);
    let logged: f64 = times.iter().sum();
    assert!((logged - steps).abs() <= 0.006, "{logged} against {said}");
    assert!(eval > 0.0 && save > 0.0, "{said}");
    assert!(
        (steps + eval + save - wall).abs() <= 0.05 * wall,
        "steps + evaluations + saves against the loop's wall time: {said}"
    );
}

/// --no-shuffle: the first step trains on the file's first rows (its loss is that of a file
/// holding those rows alone), where the default shuffle takes others.
#[test]
fn no_shuffle_takes_the_files_batches_in_order() {
    use arrow_array::{RecordBatch, StringArray};
    use std::sync::Arc;
    let d = tempfile::tempdir().unwrap();
    let model = common::minilm_layers(d.path(), 1);
    let p = condenser::data::Pairs::read(&common::data("stsb/dev.parquet"), &Default::default())
        .unwrap();
    let file = |name: &str, n: usize| {
        let cols: Vec<(&str, arrow_array::ArrayRef)> = vec![
            (
                "anchor",
                Arc::new(StringArray::from(p.sentence1[..n].to_vec())),
            ),
            (
                "positive",
                Arc::new(StringArray::from(p.sentence2[..n].to_vec())),
            ),
        ];
        let batch = RecordBatch::try_from_iter(cols).unwrap();
        let path = d.path().join(name);
        condenser::data::write_parquet(&path, batch.schema(), [&batch]).unwrap();
        path
    };
    let (whole, first) = (file("whole.parquet", 160), file("first.parquet", 16));
    let first_loss = |train: &Path, name: &str, extra: &[&str]| {
        let out = d.path().join(name);
        let mut a = vec![
            "train-biencoder",
            "--init",
            model.to_str().unwrap(),
            "--train",
            train.to_str().unwrap(),
            "--loss",
            "mnr",
            "--batch-size",
            "16",
            "--max-seq-length",
            "32",
            "--max-steps",
            "1",
            "--dropout",
            "0",
            "--out",
            out.to_str().unwrap(),
        ];
        a.extend(extra);
        common::ok(common::condenser(&a));
        common::train_log_losses(&out)[0]
    };
    let in_order = first_loss(&whole, "in-order", &["--no-shuffle"]);
    assert_eq!(in_order, first_loss(&first, "first", &["--no-shuffle"]));
    assert_ne!(in_order, first_loss(&whole, "shuffled", &[]));
}
