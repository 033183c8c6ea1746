//! The model commands end to end through the binary.
mod common;
use arrow_array::cast::AsArray;
use arrow_array::types::Float32Type;
use arrow_array::{ArrayRef, RecordBatch, StringArray};
use arrow_schema::{Field, Schema};
use condenser::data::{self, write_parquet};
use condenser::model::InferenceOptions;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

fn condenser(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_condenser"))
        .args(args)
        .output()
        .unwrap()
}

/// `condenser encode` of `input` into `out` with CONDENSER_BLAS set to `blas`.
fn encode(model: &str, input: &str, out: &Path, blas: &str) -> std::process::Output {
    let out = out.to_str().unwrap();
    let args = ["encode", "--model", model, "--input", input, "--out", out];
    common::condenser_env(&[("CONDENSER_BLAS", blas)], &args)
}

fn texts_file(dir: &Path, name: &str, texts: &[&str]) -> String {
    let fields = vec![
        Field::new("id", arrow_schema::DataType::Utf8, false),
        Field::new("text", arrow_schema::DataType::Utf8, false),
    ];
    let ids: Vec<String> = (0..texts.len()).map(|i| format!("row{i}")).collect();
    let cols: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(ids)),
        Arc::new(StringArray::from(texts.to_vec())),
    ];
    let rb = RecordBatch::try_new(Arc::new(Schema::new(fields)), cols).unwrap();
    let p = dir.join(name);
    write_parquet(&p, rb.schema(), [&rb]).unwrap();
    p.display().to_string()
}

#[test]
fn encode_keeps_rows_and_adds_the_library_embeddings() {
    let d = tempfile::tempdir().unwrap();
    let texts = [
        "A plane is taking off.",
        "A man is playing a flute.",
        "A cat sits on the mat.",
    ];
    let input = texts_file(d.path(), "in.parquet", &texts);
    let out = d.path().join("out.parquet");
    let model = common::model().display().to_string();
    // CONDENSER_BLAS=env: the binary keeps OPENBLAS_CORETYPE as this process has it. By default
    // it picks OpenBLAS's kernel for the CPU (SkylakeX on AVX-512) over a machine-wide setting
    // (this workplace sets Haswell), which this test process, a library user, keeps: two
    // kernels, sums in two orders, embeddings a few ulp apart (seen on a Zen 5)
    // On Intel CPUs this process loads oneMKL by default, and `env` would give the binary
    // OpenBLAS: there the binary is told `mkl`, which keeps the environment too (seen on a Xeon)
    use condenser::model::kernels::blas::{blas, Vendor};
    let same = match blas().map(|b| b.vendor) {
        Some(Vendor::Mkl) => "mkl",
        _ => "env",
    };
    let o = encode(&model, &input, &out, same);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // the library's inference loader, with the CLI's defaults (f32 on the CPU: on AVX2 CPUs the
    // frozen Linears on condenser's own kernel, as the CLI runs them)
    let enc = InferenceOptions::default()
        .encoder(&common::model())
        .unwrap();
    let want = enc
        .encode(&texts, 8, &indicatif::ProgressBar::hidden())
        .unwrap();
    let b = data::open(&out, &["id", "text", "embedding"])
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    assert_eq!(b.texts("id").unwrap(), ["row0", "row1", "row2"]);
    assert_eq!(b.texts("text").unwrap(), texts);
    let list = b.column("embedding").unwrap().as_fixed_size_list();
    assert_eq!(list.value_length(), 384);
    for i in 0..3 {
        let row = list.value(i);
        let row = row.as_primitive::<Float32Type>();
        assert_eq!(row.values().as_ref(), want.row(i));
    }
}

#[test]
fn empty_inputs_are_clear_errors() {
    let d = tempfile::tempdir().unwrap();
    let input = texts_file(d.path(), "empty.parquet", &[]);
    let model = common::model().display().to_string();
    let o = condenser(&[
        "encode",
        "--model",
        &model,
        "--input",
        &input,
        "--out",
        d.path().join("o.parquet").to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("empty.parquet: empty dataset"), "{e}");
    assert!(
        !d.path().join("o.parquet").exists(),
        "no output for a failed run"
    );
    let o = condenser(&[
        "evaluate",
        "--model",
        &model,
        "--sts",
        &format!("x={input}"),
    ]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && e.contains("empty.parquet") && e.contains("missing column"),
        "{e}"
    );
}

#[test]
fn evaluate_writes_results_for_every_model_and_dataset() {
    let d = tempfile::tempdir().unwrap();
    let model = common::model().display().to_string();
    let sts = format!("stsb={}", common::data("stsb/dev.parquet").display());
    let cls = format!("rte={}", common::data("rte/dev.parquet").display());
    let o = condenser(&[
        "evaluate",
        "--model",
        &model,
        "--sts",
        &sts,
        "--classification",
        &cls,
        "--out",
        d.path().to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.path().join("results.json")).unwrap()).unwrap();
    let r = v["results"].as_array().unwrap();
    assert_eq!(r.len(), 2);
    assert_eq!(
        (r[0]["task"].as_str(), r[0]["dataset"].as_str()),
        (Some("sts"), Some("stsb"))
    );
    // sentence-transformers' EmbeddingSimilarityEvaluator on the same model and data (the
    // fixture, ../shared/fixtures/reference-minilm.json: 0.867163)
    let reference = common::fixture()["sts"]["stsb-dev"]["spearman_cosine"]
        .as_f64()
        .expect("the fixture's stsb-dev spearman_cosine");
    assert!((r[0]["metrics"]["spearman_cosine"].as_f64().unwrap() - reference).abs() <= 5e-7);
    assert_eq!(r[1]["task"], "classification");
    // the threshold sweep includes "all negative" and "all positive": never below the majority rate
    let labels =
        condenser::data::Pairs::read(&common::data("rte/dev.parquet"), &Default::default())
            .unwrap()
            .labels;
    let pos = labels.iter().filter(|l| **l == 1.0).count() as f64 / labels.len() as f64;
    assert!(r[1]["metrics"]["cosine_accuracy"].as_f64().unwrap() >= pos.max(1.0 - pos));
    let ap = r[1]["metrics"]["cosine_ap"].as_f64().unwrap();
    assert!(ap > 0.0 && ap < 1.0);
    let csv = std::fs::read_to_string(d.path().join("results.csv")).unwrap();
    assert!(
        csv.starts_with("model,dataset,task,metric,value\n")
            && csv.contains(",stsb,sts,spearman_cosine,0.867"),
        "{csv}"
    );
}

#[test]
fn similarity_prints_matrix_and_writes_heatmap() {
    let d = tempfile::tempdir().unwrap();
    let model = common::model().display().to_string();
    let o = condenser(&[
        "similarity",
        "--model",
        &model,
        "--out",
        d.path().to_str().unwrap(),
        "A man eats food.",
        "A man is eating a meal.",
        "The stock market fell.",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8(o.stdout).unwrap();
    let row = |i: usize| -> Vec<f64> {
        let line = text
            .lines()
            .rfind(|l| l.trim_start().starts_with(&format!("{i} ")))
            .unwrap();
        line.split_whitespace()
            .skip(1)
            .map(|x| x.parse().unwrap())
            .collect()
    };
    let (r1, r2) = (row(1), row(2));
    assert!((r1[0] - 1.0).abs() < 1e-3 && (r1[1] - r2[0]).abs() < 1e-9);
    assert!(
        r1[1] > r1[2] + 0.3,
        "paraphrases closer than unrelated: {r1:?}"
    );
    assert!(d.path().join("similarity.png").exists() && d.path().join("similarity.svg").exists());
}

/// Without OpenBLAS (CONDENSER_BLAS=0: candle's matmul) the embeddings are the same.
#[test]
fn candle_matmul_fallback_gives_the_same_embeddings() {
    let d = tempfile::tempdir().unwrap();
    let texts = [
        "The fallback path must agree.",
        "Two dogs run through a field of tall grass near the river.",
    ];
    let input = texts_file(d.path(), "in.parquet", &texts);
    let model = common::model().display().to_string();
    let mut outs = Vec::new();
    for blas in ["0", "1"] {
        let out = d.path().join(format!("out{blas}.parquet"));
        let o = encode(&model, &input, &out, blas);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let b = data::open(&out, &["embedding"])
            .unwrap()
            .next()
            .unwrap()
            .unwrap();
        let list = b.column("embedding").unwrap().as_fixed_size_list().clone();
        outs.push(
            list.values()
                .as_primitive::<Float32Type>()
                .values()
                .to_vec(),
        );
    }
    let max = outs[0]
        .iter()
        .zip(&outs[1])
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    assert!(max < 1e-5, "max diff {max}");
}

#[test]
fn device_flag_names_what_is_wrong() {
    let run = |args: &[&str]| {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_condenser"))
            .args(args)
            .output()
            .unwrap();
        assert!(!o.status.success());
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let model = common::model();
    let m = model.to_str().unwrap();
    let input = common::data("stsb/test.parquet");
    let i = input.to_str().unwrap();
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("e.parquet");
    let o = out.to_str().unwrap();
    let enc = |flag: &str, value: &str| {
        run(&[
            "encode",
            "--model",
            m,
            "--input",
            i,
            "--columns",
            "sentence1",
            "--out",
            o,
            flag,
            value,
        ])
    };
    // flags are checked when parsed, before anything loads
    let e = enc("--device", "gpu");
    assert!(
        e.contains("'gpu' for '--device") && e.contains("expected cpu, cuda or cuda:N"),
        "{e}"
    );
    assert!(enc("--device", "cuda:x").contains("expected cpu, cuda or cuda:N"));
    let e = enc("--dtype", "f8");
    assert!(
        e.contains("'f8' for '--dtype") && e.contains("possible values: f32, bf16, f16"),
        "{e}"
    );
    #[cfg(not(feature = "cuda"))]
    {
        assert!(enc("--device", "cuda").contains("built without the `cuda` feature"));
        let e = run(&[
            "train-biencoder",
            "--init",
            m,
            "--train",
            i,
            "--loss",
            "cosine",
            "--out",
            d.path().join("b").to_str().unwrap(),
            "--device",
            "cuda:1",
        ]);
        assert!(
            e.contains("--device cuda:1: this condenser was built without"),
            "{e}"
        );
    }
    assert!(!out.exists(), "nothing written on a bad device");
}
