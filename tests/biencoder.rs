//! train-biencoder and train-nli on a tiny random BERT and real sentences: each loss falls after
//! one step, the saved sentence-transformers folder reloads to the same embeddings, and bad input
//! (missing columns, unknown NLI labels) is a clear error.
mod common;
use condenser::data;
use condenser::model::{Pooling, SentenceEncoder};
use condenser::train::biencoder::{BiData, BiEncoderOptions, BiEncoderTask};
use condenser::train::losses;
use condenser::train::{params, AdamW, TrainTask};
use std::path::Path;

/// 8 STSb train rows as sentence1, sentence2, label (score/5), anchor, positive, negative
/// (another row's sentence2) and class (score bucket 0..3), as Parquet.
fn pairs_file(dir: &Path) -> std::path::PathBuf {
    use arrow_array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
    use std::sync::Arc;
    let p = data::Pairs::read(&common::data("stsb/train.parquet"), &Default::default()).unwrap();
    let n = 8;
    let s1: Vec<&str> = p.sentence1[..n].iter().map(String::as_str).collect();
    let s2: Vec<&str> = p.sentence2[..n].iter().map(String::as_str).collect();
    let neg: Vec<&str> = (0..n).map(|i| s2[(i + 3) % n]).collect();
    let cols: Vec<(&str, ArrayRef)> = vec![
        ("sentence1", Arc::new(StringArray::from(s1.clone()))),
        ("sentence2", Arc::new(StringArray::from(s2.clone()))),
        (
            "label",
            Arc::new(Float64Array::from(p.labels[..n].to_vec())),
        ),
        ("anchor", Arc::new(StringArray::from(s1))),
        ("positive", Arc::new(StringArray::from(s2))),
        ("negative", Arc::new(StringArray::from(neg))),
        (
            "class",
            Arc::new(Int64Array::from_iter_values((0..n as i64).map(|i| i % 3))),
        ),
    ];
    let batch = RecordBatch::try_from_iter(cols).unwrap();
    let path = dir.join("pairs.parquet");
    data::write_parquet(&path, batch.schema(), [&batch]).unwrap();
    path
}

use common::condenser as run;

/// Teacher vectors: `condenser encode` of the sentence1 column with the tiny model (dim 8).
fn teacher_file(dir: &Path, tiny: &Path, pairs: &Path) -> std::path::PathBuf {
    let out = dir.join("teacher.parquet");
    let o = run(&[
        "encode",
        "--model",
        tiny.to_str().unwrap(),
        "--input",
        pairs.to_str().unwrap(),
        "--columns",
        "sentence2",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    out
}

fn loss_value(task: &BiEncoderTask, idx: &[usize]) -> f32 {
    task.loss(idx, 1, None)
        .unwrap()
        .total
        .to_scalar::<f32>()
        .unwrap()
}

/// A bi-encoder task from `init` with the registry's loss `name`.
fn bi_task(
    init: &Path,
    name: &str,
    pooling: Option<Pooling>,
    max_len: usize,
    seed: u64,
) -> BiEncoderTask {
    let opts = BiEncoderOptions {
        saved_max_seq_length: None,
        pooling,
        max_seq_length: max_len,
        num_labels: 3,
        seed,
        device: candle_core::Device::Cpu,
        mini_batch_size: None,
    };
    BiEncoderTask::new(init, losses::find(name).unwrap(), &opts).unwrap()
}

/// The task's training data from `file`'s columns `cols`.
fn read(task: &BiEncoderTask, file: &Path, cols: &str) -> condenser::Result<BiData> {
    BiData::read(file, task.spec, Some(&cols.parse().unwrap()), &task.enc, 3)
}

#[test]
fn one_step_lowers_every_loss() {
    let d = tempfile::tempdir().unwrap();
    let tiny = common::tiny_bert(d.path());
    let pairs = pairs_file(d.path());
    let teacher = teacher_file(d.path(), &tiny, &pairs);
    let cases: [(&str, &Path, &str); 7] = [
        ("cosine", &pairs, "sentence1,sentence2,label"),
        ("mse", &teacher, "sentence1,embedding"),
        ("softmax", &pairs, "sentence1,sentence2,class"),
        ("mnr", &pairs, "anchor,positive,negative?"),
        ("mnr-masked", &pairs, "anchor,positive,negative"),
        ("contrastive", &pairs, "anchor,positive"),
        ("triplet", &pairs, "anchor,positive,negative"),
    ];
    for (name, file, cols) in cases {
        let mut task = bi_task(&tiny, name, Some(Pooling::MEAN), 64, 1);
        task.data = read(&task, file, cols).unwrap();
        let idx: Vec<usize> = (0..task.num_examples()).collect();
        let before = loss_value(&task, &idx);
        let mut opt = AdamW::new(params::vars(task.varmap()), 0.01);
        let grads = opt.gradients(task.loss(&idx, 1, None).unwrap().total.backward().unwrap());
        opt.step(&grads, 1e-3, 1.0).unwrap();
        let after = loss_value(&task, &idx);
        eprintln!("{name}: {before} -> {after}");
        assert!(
            before.is_finite() && after < before,
            "{name}: {before} -> {after}"
        );
    }
}

/// mnr-masked is MNR on a batch without repeated texts; a row given twice (same anchor, same
/// positive) is left out of its twin's negatives, which lowers the loss below MNR's.
#[test]
fn masked_mnr_drops_only_repeated_rows_from_the_negatives() {
    let d = tempfile::tempdir().unwrap();
    let tiny = common::tiny_bert(d.path());
    let pairs = pairs_file(d.path());
    let value = |name: &str, idx: &[usize]| {
        let mut task = bi_task(&tiny, name, Some(Pooling::MEAN), 64, 1);
        task.data = read(&task, &pairs, "anchor,positive").unwrap();
        loss_value(&task, idx)
    };
    let distinct = [0, 1, 2, 3];
    let (plain, masked) = (value("mnr", &distinct), value("mnr-masked", &distinct));
    assert!((plain - masked).abs() < 1e-6, "{plain} vs {masked}");
    let repeated = [0, 0, 1, 2];
    let (plain, masked) = (value("mnr", &repeated), value("mnr-masked", &repeated));
    assert!(masked < plain - 1e-3, "masked {masked} vs mnr {plain}");
}

#[test]
fn saved_folder_reloads_to_the_same_embeddings() {
    let d = tempfile::tempdir().unwrap();
    let tiny = common::tiny_bert(d.path());
    let pairs = pairs_file(d.path());
    let out = d.path().join("bi");
    let o = run(&[
        "train-biencoder",
        "--init",
        tiny.to_str().unwrap(),
        "--train",
        pairs.to_str().unwrap(),
        "--loss",
        "softmax",
        "--columns",
        "sentence1,sentence2,class",
        "--pooling",
        "cls",
        "--out",
        out.to_str().unwrap(),
        "--batch-size",
        "4",
        "--lr",
        "1e-3",
        "--max-seq-length",
        "32",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for f in [
        "modules.json",
        "1_Pooling/config.json",
        "sentence_bert_config.json",
        "config.json",
        "tokenizer.json",
        "softmax_head.safetensors",
        "train_log.csv",
    ] {
        assert!(out.join(f).is_file(), "missing {f}");
    }
    // the folder holds the backbone only (no softmax head), under BertModel's names
    let w =
        candle_core::safetensors::load(out.join("model.safetensors"), &candle_core::Device::Cpu)
            .unwrap();
    assert!(w.contains_key("embeddings.word_embeddings.weight"));
    assert!(!w
        .keys()
        .any(|k| k.starts_with("softmax_head") || k.starts_with("bert.")));
    let enc = SentenceEncoder::load(&out, &candle_core::Device::Cpu).unwrap();
    assert_eq!(enc.pooling, Pooling::CLS);
    assert_eq!(enc.max_seq_length, 32);
    // the trained weights, not the initial ones: the loaded encoder differs from the tiny start
    // and equals the task rebuilt from the saved folder
    let texts = ["A man is playing a guitar.", "The cat sleeps on the mat."];
    let ours = enc
        .encode(&texts, 2, &indicatif::ProgressBar::hidden())
        .unwrap();
    let start = SentenceEncoder::load(&tiny, &candle_core::Device::Cpu).unwrap();
    let mut start_cls = start;
    start_cls.pooling = enc.pooling;
    let before = start_cls
        .encode(&texts, 2, &indicatif::ProgressBar::hidden())
        .unwrap();
    assert_ne!(ours, before, "training changed nothing");
    let again = bi_task(&out, "cosine", None, 32, 9);
    assert_eq!(
        again
            .enc
            .encode(&texts, 2, &indicatif::ProgressBar::hidden())
            .unwrap(),
        ours
    );
}

#[test]
fn missing_columns_and_bad_labels_are_clear_errors() {
    let d = tempfile::tempdir().unwrap();
    let tiny = common::tiny_bert(d.path());
    let stsb = common::data("stsb/train.parquet");
    let task = bi_task(&tiny, "triplet", None, 32, 1);
    let e = read(&task, &stsb, "anchor,positive,negative")
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("loss triplet")
            && e.contains("column 'anchor': missing column")
            && e.contains("train.parquet"),
        "{e}"
    );
    // softmax on STSb's float labels: a class id is expected, the row is named
    let task = bi_task(&tiny, "softmax", None, 32, 1);
    let e = read(&task, &stsb, "sentence1,sentence2,score")
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("row 1") && e.contains("score") && e.contains("class id"),
        "{e}"
    );
    // NLI: string labels, -1 and '-' dropped and counted, an unknown word names its row
    let nli = d.path().join("nli.csv");
    std::fs::write(&nli, "sentence1,sentence2,label\nA man sleeps.,A person rests.,entailment\nA man sleeps.,A man runs.,contradiction\nA dog.,An animal.,-\nA cat.,A pet.,neutral\nA car.,A bus.,-1\n").unwrap();
    let (p, dropped) = data::read_nli(&nli, &Default::default()).unwrap();
    assert_eq!((p.labels.clone(), dropped), (vec![0.0, 2.0, 1.0], 2));
    std::fs::write(&nli, "sentence1,sentence2,label\nA man sleeps.,A person rests.,entailment\nA man sleeps.,A man runs.,maybe\n").unwrap();
    let e = data::read_nli(&nli, &Default::default())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("row 2") && e.contains("maybe"), "{e}");
}

#[test]
fn train_nli_counts_dropped_rows_and_scores_accuracy() {
    let d = tempfile::tempdir().unwrap();
    let tiny = common::tiny_bert(d.path());
    let out = d.path().join("nli");
    let snli = common::data("snli/test.parquet");
    let o = run(&[
        "train-nli",
        "--init",
        tiny.to_str().unwrap(),
        "--train",
        snli.to_str().unwrap(),
        "--dev",
        common::data("snli/dev.parquet").to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--max-steps",
        "4",
        "--max-seq-length",
        "32",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("rows without a gold label dropped")
            && stdout.contains("best dev accuracy"),
        "{stdout}"
    );
    let acc: f64 = stdout
        .split("best dev accuracy ")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        (0.2..0.5).contains(&acc),
        "a 4-step tiny model should be near chance, got {acc}"
    );
}

/// The GPU path's optimizer (moments as tensors, updated with tensor ops) trains a real model the
/// same as the CPU path (host moments): three MNR steps, every weight matrix within 2e-6.
#[test]
fn tensor_moments_train_like_host_moments() {
    let d = tempfile::tempdir().unwrap();
    let tiny = common::tiny_bert(d.path());
    let pairs = pairs_file(d.path());
    let run = |tensor_moments: bool, steps: usize| -> Vec<(String, Vec<f32>)> {
        let mut task = bi_task(&tiny, "mnr", Some(Pooling::MEAN), 64, 1);
        task.data = read(&task, &pairs, "anchor,positive").unwrap();
        let vars = params::vars(task.varmap());
        let mut opt = if tensor_moments {
            AdamW::with_tensor_moments(vars, 0.01).unwrap()
        } else {
            AdamW::new(vars, 0.01)
        };
        for s in 0..steps {
            let idx: Vec<usize> = (0..6).map(|i| (i + s * 3) % 8).collect();
            let grads = opt.gradients(task.loss(&idx, 1, None).unwrap().total.backward().unwrap());
            opt.step(&grads, 1e-3, 0.5).unwrap();
        }
        params::vars(task.varmap())
            .into_iter()
            .map(|(n, v)| (n, v.flatten_all().unwrap().to_vec1().unwrap()))
            .collect()
    };
    let (host, tensor) = (run(false, 3), run(true, 3));
    assert_eq!(host.len(), tensor.len());
    let initial = run(false, 0);
    for ((n, a), (_, b)) in host.iter().zip(&tensor) {
        let diff = a
            .iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0f32, f32::max);
        assert!(diff < 2e-6, "{n}: {diff}");
    }
    assert!(
        host.iter().zip(&initial).any(|(a, b)| a.1 != b.1),
        "the steps moved the weights"
    );
}
