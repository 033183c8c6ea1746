//! bf16 and f16 products on the CPU (model/precision.rs) against sentence-transformers' f32
//! figures: the fixture's embeddings and STSb test, through the options every command uses.
mod common;
use candle_core::Device;
use condenser::eval::{sts::StsEvaluator, Evaluator, Model};
use condenser::model::bf16;
use condenser::model::precision::Precision;
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
    let fx = common::fixture();
    let sentences: Vec<&str> = fx["embeddings"]["sentences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    let enc = options(dtype).encoder(&common::model()).unwrap();
    let got = enc.encode(&sentences, 16, &ProgressBar::hidden()).unwrap();
    let (mut worst, mut max_diff) = (1f64, 0f64);
    for (i, w) in fx["embeddings"]["vectors"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
    {
        let w: Vec<f64> = w
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect();
        let g: Vec<f64> = got.row(i).iter().map(|&x| x as f64).collect();
        let n = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
        let dot: f64 = g.iter().zip(&w).map(|(a, b)| a * b).sum();
        worst = worst.min(dot / (n(&g) * n(&w)));
        for (a, b) in g.iter().zip(&w) {
            max_diff = max_diff.max((a - b).abs());
        }
    }
    (worst, max_diff)
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
        eprintln!("this CPU has no AVX512-BF16; refused: {msg}");
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
