//! `--threads` changes speed only: the same command trains the same weights on 1, 2 or 4
//! threads (dropout masks keyed by example, one split of the batch), within 1e-5 after a few
//! steps: a bi-encoder with a per-example loss (cosine) and one with in-batch negatives (mnr), a
//! cross-encoder, and Condenser pre-training; all with dropout on. Before, masks were keyed by a
//! row's place in its shard and each shard drew from its own stream: 8e-5 apart after 6 steps.
mod common;
use candle_core::safetensors::load;
use candle_core::Device;
use std::path::{Path, PathBuf};

/// The largest difference between two model.safetensors, tensor by tensor (names must agree).
fn max_diff(a: &Path, b: &Path) -> f32 {
    let (a, b) = (
        load(a.join("model.safetensors"), &Device::Cpu).unwrap(),
        load(b.join("model.safetensors"), &Device::Cpu).unwrap(),
    );
    assert_eq!(a.len(), b.len());
    let mut worst = 0f32;
    for (name, x) in &a {
        let y = &b[name];
        let d = (x - y).unwrap().abs().unwrap().flatten_all().unwrap();
        worst = worst.max(d.max(0).unwrap().to_scalar::<f32>().unwrap());
    }
    worst
}

/// Train with `args` at 1, 2 and 4 threads into `dir/t1`, `t2`, `t4`; the two differences from
/// one thread's weights.
fn across_threads(dir: &Path, args: &[&str]) -> (f32, f32) {
    let run = |t: &str| -> PathBuf {
        let out = dir.join(format!("t{t}"));
        let mut a: Vec<&str> = args.to_vec();
        a.extend(["--threads", t, "--out", out.to_str().unwrap()]);
        let o = common::condenser(&a);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let said = String::from_utf8_lossy(&o.stdout);
        assert!(said.contains("condenser's engine"), "{said}");
        out
    };
    let (one, two, four) = (run("1"), run("2"), run("4"));
    (max_diff(&one, &two), max_diff(&one, &four))
}

fn check(name: &str, (two, four): (f32, f32)) {
    eprintln!("{name}: 1 vs 2 threads {two:.2e}, 1 vs 4 threads {four:.2e}");
    assert!(
        two <= 1e-5 && four <= 1e-5,
        "{name}: {two:.2e} / {four:.2e}"
    );
}

#[test]
fn every_training_command_trains_the_same_weights_on_any_thread_count() {
    let d = tempfile::tempdir().unwrap();
    let tiny = common::tiny_bert(d.path());
    let tiny = tiny.to_str().unwrap();
    let stsb = common::data("stsb/dev.parquet");
    let stsb = stsb.to_str().unwrap();
    let steps = [
        "--batch-size",
        "16",
        "--max-steps",
        "4",
        "--dropout",
        "0.1",
        "--lr",
        "1e-4",
    ];
    for loss in ["cosine", "mnr"] {
        let dir = d.path().join(loss);
        let columns = match loss {
            "cosine" => "sentence1,sentence2,label",
            _ => "sentence1,sentence2",
        };
        let mut a = vec![
            "train-biencoder",
            "--init",
            tiny,
            "--train",
            stsb,
            "--loss",
            loss,
        ];
        a.extend(["--columns", columns]);
        a.extend(steps);
        check(&format!("bi-encoder {loss}"), across_threads(&dir, &a));
    }
    let mut a = vec!["train-cross-encoder", "--model", tiny, "--train", stsb];
    a.extend(steps);
    check("cross-encoder", across_threads(&d.path().join("ce"), &a));
    let corpus = common::data("wikitext2/test.parquet");
    let mut a = vec![
        "pretrain",
        "--model",
        tiny,
        "--corpus",
        corpus.to_str().unwrap(),
    ];
    a.extend(["--max-seq-length", "32"]);
    a.extend(steps);
    check("pretrain", across_threads(&d.path().join("pt"), &a));
}
