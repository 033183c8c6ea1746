//! bf16 and f16 products on the CPU (model/kernels/precision.rs) against sentence-transformers' f32
//! figures: the fixture's embeddings and STSb test, through the options every command uses.
mod common;
use candle_core::Device;
use condenser::eval::{sts::StsEvaluator, Evaluator, Model};
use condenser::model::kernels::bf16;
use condenser::model::kernels::precision::Precision;
use condenser::model::InferenceOptions;
use condenser::runtime::ComputeType;
use indicatif::ProgressBar;

fn options(dtype: ComputeType) -> InferenceOptions {
    InferenceOptions {
        device: Device::Cpu,
        dtype: Some(dtype),
        ..Default::default()
    }
}

/// Worst cosine and largest absolute difference of `dtype`'s fixture embeddings to the fixture's.
fn fixture_fidelity(dtype: ComputeType) -> (f64, f64) {
    let (sentences, want) = common::fixture_embeddings();
    let sentences: Vec<&str> = sentences.iter().map(String::as_str).collect();
    let enc = options(dtype).encoder(&common::model()).unwrap();
    let got = enc.encode(&sentences, 16, &ProgressBar::hidden()).unwrap();
    let rows: Vec<Vec<f32>> = (0..got.len()).map(|i| got.row(i).to_vec()).collect();
    common::worst_cosine_and_max_diff(&rows, &want)
}

#[test]
fn bf16_embeddings_within_0_999_cosine_and_stsb_within_2e3() {
    if !bf16::supported() {
        // the one clear refusal, naming the CPU and the way out
        let e = options(ComputeType::Bf16)
            .encoder(&common::model())
            .err()
            .unwrap();
        let msg = e.to_string();
        assert!(
            msg.contains("AVX512-BF16") && msg.contains("--dtype f32"),
            "{msg}"
        );
        condenser::runtime::skipped(
            "bf16 fidelity",
            "avx512bf16",
            &format!("this CPU has no AVX512-BF16; the refusal was checked: {msg}"),
        );
        return;
    }
    let (worst, max_diff) = fixture_fidelity(ComputeType::Bf16);
    eprintln!("bf16: worst cosine {worst:.6}, max abs diff {max_diff:.2e}");
    assert!(worst >= 0.999, "worst cosine {worst}");
    // computed in bf16, not silently in f32 (f32 matches within 1e-5: tests/model_parity.rs)
    assert!(max_diff > 1e-4, "max abs diff {max_diff}");

    let enc = options(ComputeType::Bf16)
        .encoder(&common::model())
        .unwrap();
    assert_eq!(enc.bert.precision(), Precision::Bf16);
    let want = common::fixture()["sts"]["stsb-test"]["spearman_cosine"]
        .as_f64()
        .unwrap();
    let got = StsEvaluator::read(&common::data("stsb/test.parquet"), &Default::default())
        .unwrap()
        .run(&Model::encoder(&enc), 32, &ProgressBar::hidden())
        .unwrap()
        .metrics
        .into_iter()
        .find(|(name, _)| name == "spearman_cosine")
        .unwrap()
        .1;
    eprintln!("bf16 STSb test spearman_cosine {got:.6} (f32 fixture {want:.6})");
    assert!((got - want).abs() <= 2e-3, "{got} vs {want}");
}

/// Documents, the attention's products in bf16 at 256-token lengths (kernels/bf16/attention.rs;
/// the fixture's sentences test short texts): Cranfield's first 60 abstracts in bf16 within
/// cosine 0.999 of f32, and not f32's bits.
#[test]
fn bf16_documents_within_0_999_cosine_of_f32() {
    if !bf16::supported() {
        condenser::runtime::skipped(
            "bf16 documents",
            "avx512bf16",
            "this CPU has no AVX512-BF16 (the refusal is checked above)",
        );
        return;
    }
    let corpus = common::data("cranfield/corpus.parquet");
    let texts = condenser::data::read_texts(&corpus, "text", Some(60)).unwrap();
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    let embed = |dtype| {
        let enc = options(dtype).encoder(&common::model()).unwrap();
        let got = enc.encode(&texts, 16, &ProgressBar::hidden()).unwrap();
        (0..got.len())
            .map(|i| got.row(i).to_vec())
            .collect::<Vec<Vec<f32>>>()
    };
    let (f32s, bf16s) = (embed(ComputeType::F32), embed(ComputeType::Bf16));
    let want: Vec<Vec<f64>> = f32s
        .iter()
        .map(|r| r.iter().map(|&x| x as f64).collect())
        .collect();
    let (worst, max_diff) = common::worst_cosine_and_max_diff(&bf16s, &want);
    eprintln!("bf16 documents: worst cosine {worst:.6}, max abs diff {max_diff:.2e}");
    assert!(worst >= 0.999, "worst cosine {worst}");
    assert!(
        max_diff > 1e-4,
        "bf16 gave f32's numbers: max abs diff {max_diff}"
    );
}

#[test]
fn f16_embeddings_within_0_999_cosine() {
    let (worst, max_diff) = fixture_fidelity(ComputeType::F16);
    eprintln!("f16: worst cosine {worst:.6}, max abs diff {max_diff:.2e}");
    assert!(worst >= 0.999, "worst cosine {worst}");
    assert!(max_diff > 1e-6, "max abs diff {max_diff}");
}

#[test]
fn encode_command_takes_dtype_bf16() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("emb.parquet");
    let model = common::model();
    let input = common::data("stsb/dev.parquet");
    let run = common::condenser(&[
        "encode",
        "--model",
        model.to_str().unwrap(),
        "--input",
        input.to_str().unwrap(),
        "--columns",
        "sentence1",
        "--dtype",
        "bf16",
        "--out",
        out.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&run.stderr);
    if bf16::supported() {
        assert!(run.status.success(), "{err}");
        assert!(out.is_file());
    } else {
        assert!(
            !run.status.success() && err.contains("AVX512-BF16"),
            "{err}"
        );
        assert!(!out.exists());
    }
}

/// `train-cross-encoder` on STSb train (both orders) from all-MiniLM-L6-v2, 200 steps, batch 16.
fn train_minilm(out: &std::path::Path, precision: &str) -> (Vec<f64>, f64) {
    let (model, train, dev) = (
        common::model(),
        common::data("stsb/train.parquet"),
        common::data("stsb/dev.parquet"),
    );
    let o = common::condenser(&[
        "train-cross-encoder",
        "--model",
        model.to_str().unwrap(),
        "--train",
        train.to_str().unwrap(),
        "--dev",
        dev.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--both-orders",
        "--max-steps",
        "200",
        "--max-seq-length",
        "64",
        "--checkpoint-steps",
        "1000",
        "--precision",
        precision,
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        // f32 says "f32 products"; bf16 names its route ("bf16 on condenser's AVX512-BF16 kernel products")
        stdout.contains(&format!("; {precision} products"))
            || stdout.contains(&format!("; {precision} on ")),
        "{stdout}"
    );
    let losses = common::train_log_losses(out);
    let dev: f64 = stdout
        .split("best dev spearman ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .unwrap()
        .parse()
        .unwrap();
    (losses, dev)
}

#[test]
fn bf16_training_follows_f32_on_stsb() {
    if !bf16::supported() {
        let d = tempfile::tempdir().unwrap();
        let o = common::condenser(&[
            "train-cross-encoder",
            "--model",
            common::model().to_str().unwrap(),
            "--train",
            common::data("stsb/dev.parquet").to_str().unwrap(),
            "--out",
            d.path().to_str().unwrap(),
            "--precision",
            "bf16",
        ]);
        assert!(!o.status.success());
        assert!(String::from_utf8_lossy(&o.stderr).contains("AVX512-BF16"));
        condenser::runtime::skipped(
            "bf16 training",
            "avx512bf16",
            "this CPU has no AVX512-BF16; the refusal was checked",
        );
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let (f32_loss, f32_dev) = train_minilm(&d.path().join("f32"), "f32");
    let (bf16_loss, bf16_dev) = train_minilm(&d.path().join("bf16"), "bf16");
    assert_eq!((f32_loss.len(), bf16_loss.len()), (200, 200));
    let rel: f64 = f32_loss
        .iter()
        .zip(&bf16_loss)
        .map(|(a, b)| (a - b).abs() / a.abs())
        .sum::<f64>()
        / 200.0;
    eprintln!("200 steps: mean relative loss difference {rel:.2e}; dev spearman f32 {f32_dev:.4}, bf16 {bf16_dev:.4}");
    assert!(rel < 0.02, "mean relative loss difference {rel}");
    assert!((f32_dev - bf16_dev).abs() < 0.01, "{f32_dev} vs {bf16_dev}");
    // the runs differ at all: bf16 products were used, not f32 under another name
    assert_ne!(f32_loss, bf16_loss);
}

/// SIGKILL + --resume equals the uninterrupted run in bf16 and in f16 (whose loss scale and its
/// step count travel in the checkpoint), on a tiny BERT.
#[test]
fn low_precision_resume_is_exact() {
    let d = tempfile::tempdir().unwrap();
    let tiny = common::tiny_bert(d.path());
    let cmd = |out: &std::path::Path, precision: &str, extra: &[&str]| {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_condenser"));
        c.args(["train-cross-encoder", "--model", tiny.to_str().unwrap()]);
        c.args([
            "--train",
            common::data("stsb/train.parquet").to_str().unwrap(),
        ]);
        c.args([
            "--out",
            out.to_str().unwrap(),
            "--max-steps",
            "240",
            "--lr",
            "1e-3",
        ]);
        c.args(["--checkpoint-steps", "20", "--precision", precision]);
        // the finished runs' checkpoints are read and resumed below
        c.arg("--keep-checkpoint");
        c.args(extra);
        c
    };
    let precisions: &[&str] = if bf16::supported() {
        &["bf16", "f16"]
    } else {
        &["f16"]
    };
    for &p in precisions {
        let (a, b) = (
            d.path().join(format!("{p}-a")),
            d.path().join(format!("{p}-b")),
        );
        let o = cmd(&a, p, &[]).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let state: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(a.join("checkpoint/state.json")).unwrap(),
        )
        .unwrap();
        let scale = &state["state"]["loss_scale"];
        if p == "f16" {
            assert!(scale.as_f64().is_some_and(|s| s >= 1.0), "{scale}");
        } else {
            assert!(scale.is_null(), "{scale}");
        }
        let killed_at = common::kill_after_checkpoint(cmd(&b, p, &[]), &b, 60);
        assert!(killed_at < 240);
        let o = cmd(&b, p, &["--resume"]).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(
            std::fs::read(a.join("model.safetensors")).unwrap(),
            std::fs::read(b.join("model.safetensors")).unwrap(),
            "{p}: resumed from step {killed_at}, final weights differ"
        );
        // another precision cannot continue this run
        let other = if p == "f16" { "f32" } else { "f16" };
        let o = cmd(&b, other, &["--resume"]).output().unwrap();
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && e.contains("--precision"), "{e}");
    }
}
