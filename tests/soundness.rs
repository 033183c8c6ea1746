//! A run that goes wrong stops before it saves: gradients that are not finite while the loss is
//! (here sqrt's at 0: loss 0, gradient infinity) are never applied and never checkpointed.
mod common;
use candle_core::{DType, Device, Tensor};
use candle_nn::{VarBuilder, VarMap};
use condenser::error::Result;
use condenser::model::kernels::precision::Precision;
use condenser::model::{Dropout, DropoutRates};
use condenser::train::{train, LossOutput, Score, TaskKey, TrainConfig, TrainTask};
use indicatif::ProgressBar;
use std::path::Path;

/// One parameter w, started at `w0`; each example's loss is sqrt(w^2) = |w| through sqrt, whose
/// gradient at w = 0 is w / sqrt(0): NaN, with a finite loss of 0.
struct SqrtTask {
    varmap: VarMap,
    w: Tensor,
}

impl SqrtTask {
    fn new(w0: f32) -> SqrtTask {
        let varmap = VarMap::new();
        let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
        let w = vb
            .get_with_hints(1, "w", candle_nn::Init::Const(w0 as f64))
            .unwrap();
        SqrtTask { varmap, w }
    }
}

impl TrainTask for SqrtTask {
    fn num_examples(&self) -> usize {
        8
    }
    fn loss(&self, idx: &[usize], _seed: u64, _drop: Option<&Dropout>) -> Result<LossOutput> {
        let l = self.w.sqr()?.sqrt()?.sum_all()?;
        Ok(LossOutput::single((l * idx.len() as f64)?))
    }
    fn key(&self) -> TaskKey {
        TaskKey {
            loss: "sqrt".into(),
            data: "none".into(),
        }
    }
    fn dropout_rates(&self) -> DropoutRates {
        DropoutRates::uniform(0.0)
    }
    fn evaluate(&self) -> Result<Option<Score>> {
        Ok(None)
    }
    fn varmap(&self) -> &VarMap {
        &self.varmap
    }
    fn save(&self, dir: &Path) -> Result<()> {
        std::fs::write(dir.join("saved"), b"w").map_err(|e| condenser::Error::file(dir, e))
    }
}

fn config(out: &Path, precision: Precision) -> TrainConfig {
    TrainConfig {
        epochs: 1,
        batch_size: 2,
        lr: 1e-2,
        warmup: 0.0,
        weight_decay: 0.0,
        max_grad_norm: 1.0,
        grad_accum: 1,
        seed: 1,
        dropout: None,
        eval_steps: None,
        checkpoint_steps: 1,
        max_steps: None,
        threads: 1,
        precision,
        no_shuffle: false,
        out: out.to_path_buf(),
    }
}

#[test]
fn gradients_that_are_not_finite_stop_the_run_before_any_save() {
    let d = tempfile::tempdir().unwrap();
    let task = SqrtTask::new(0.0);
    let e = train(
        &task,
        &config(d.path(), Precision::F32),
        false,
        &ProgressBar::hidden(),
    )
    .expect_err("a run with NaN gradients must stop")
    .to_string();
    assert!(
        e.contains("gradients' norm is NaN at step 1") && e.contains("none ("),
        "{e}"
    );
    assert!(
        !d.path().join("checkpoint").exists(),
        "a checkpoint was written"
    );
    assert!(!d.path().join("saved").exists(), "a model was saved");
    assert_eq!(
        task.w.to_vec1::<f32>().unwrap(),
        [0.0],
        "the step was applied"
    );
    // the control: the same task away from 0 trains and saves
    let ok = SqrtTask::new(1.0);
    train(
        &ok,
        &config(d.path(), Precision::F32),
        false,
        &ProgressBar::hidden(),
    )
    .unwrap();
    assert!(d.path().join("checkpoint").exists() && d.path().join("saved").exists());
}

/// Prints what the libraries read at start, for the test below (a no-op unless asked).
#[test]
fn print_library_environment() {
    if std::env::var_os("CONDENSER_ENV_PROBE").is_some() {
        // load the BLAS as a library user would, then look at the environment
        let _ = condenser::model::kernels::blas::blas();
        for k in ["CANDLE_NUM_THREADS", "OPENBLAS_CORETYPE"] {
            println!("{k}={:?}", std::env::var(k).ok());
        }
    }
}

/// Linking the library sets nothing in the process's environment (it did, from a load-time
/// constructor): a library user decides its own process's settings; the binary prepares them.
#[test]
fn linking_the_library_changes_no_environment() {
    let o = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["print_library_environment", "--exact", "--nocapture"])
        .env("CONDENSER_ENV_PROBE", "1")
        .env_remove("CANDLE_NUM_THREADS")
        .env_remove("OPENBLAS_CORETYPE")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}");
    for k in ["CANDLE_NUM_THREADS", "OPENBLAS_CORETYPE"] {
        assert!(out.contains(&format!("{k}=None")), "{k} was set: {out}");
    }
}

/// Pairs of long texts (Cranfield titles and abstracts), labelled 0/1, for the cross-encoder.
fn long_pairs(dir: &Path, n: usize) -> std::path::PathBuf {
    use arrow_array::{ArrayRef, Float32Array, RecordBatch, StringArray};
    use std::sync::Arc;
    let docs =
        condenser::data::retrieval::read_documents(&common::data("cranfield/corpus.parquet"))
            .unwrap();
    let docs: Vec<_> = docs
        .iter()
        .filter(|d| d.text.len() > 1000)
        .take(n)
        .collect();
    let a = StringArray::from_iter_values(docs.iter().map(|d| d.title.clone().unwrap_or_default()));
    let b = StringArray::from_iter_values(docs.iter().map(|d| d.text.clone()));
    let y = Float32Array::from_iter_values((0..docs.len()).map(|i| (i % 2) as f32));
    let cols: Vec<(&str, ArrayRef)> = vec![
        ("sentence1", Arc::new(a)),
        ("sentence2", Arc::new(b)),
        ("label", Arc::new(y)),
    ];
    let batch = RecordBatch::try_from_iter(cols).unwrap();
    let out = dir.join("long.parquet");
    condenser::data::write_parquet(&out, batch.schema(), [&batch]).unwrap();
    out
}

/// `--max-seq-length` past the model's positions is cut to them, said once, in every training
/// command: the cross-encoder used to slice past the position table ("a training shard
/// panicked"). The tiny model has 128 positions; the pairs run to ~300 tokens.
#[test]
fn a_length_past_the_positions_is_cut_to_them_and_said() {
    let d = tempfile::tempdir().unwrap();
    let tiny = common::tiny_bert(d.path());
    let pairs = long_pairs(d.path(), 16);
    let out = d.path().join("ce");
    let o = common::condenser(&[
        "train-cross-encoder",
        "--model",
        tiny.to_str().unwrap(),
        "--train",
        pairs.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--max-seq-length",
        "1024",
        "--batch-size",
        "8",
        "--max-steps",
        "2",
        "--threads",
        "2",
    ]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(o.status.success(), "{stderr}");
    let note = "--max-seq-length 1024 is past the model's 128 positions: 128 used";
    assert_eq!(stdout.matches(note).count(), 1, "{stdout}");
}

/// Skips for something the machine has.
#[test]
fn skip_probe() {
    if let Ok(needs) = std::env::var("CONDENSER_SKIP_PROBE") {
        condenser::runtime::skipped("a probe", &needs, "asked to skip");
    }
}

/// A skip prints its reason and passes, unless CONDENSER_STRICT says the machine has what the
/// skipped check needs: then it fails (CI lists what /proc/cpuinfo shows).
#[test]
fn strict_skips_fail_where_the_machine_has_what_they_need() {
    let probe = |strict: &str| {
        std::process::Command::new(std::env::current_exe().unwrap())
            .args(["skip_probe", "--exact"])
            .env("CONDENSER_SKIP_PROBE", "avx512bf16")
            .env("CONDENSER_STRICT", strict)
            .output()
            .unwrap()
    };
    assert!(probe("").status.success(), "a plain skip fails");
    assert!(
        probe("blas,avx2").status.success(),
        "a skip for what is not listed fails"
    );
    let o = probe("blas,avx512bf16");
    assert!(!o.status.success(), "a strict skip passed");
    assert!(String::from_utf8_lossy(&o.stdout).contains("CONDENSER_STRICT says"));
    assert!(!probe("all").status.success());
}

/// The summary names the path that trained, not the one the environment allows: a model whose
/// activation the engine does not run (gelu_new) trains through candle's graph, and says so.
#[test]
fn the_summary_names_the_path_that_ran() {
    let d = tempfile::tempdir().unwrap();
    let tiny = common::tiny_bert(d.path());
    let cfg = tiny.join("config.json");
    let mut c: serde_json::Value = serde_json::from_slice(&std::fs::read(&cfg).unwrap()).unwrap();
    c["hidden_act"] = "gelu_new".into();
    std::fs::write(&cfg, c.to_string()).unwrap();
    let o = common::condenser(&[
        "train-biencoder",
        "--init",
        tiny.to_str().unwrap(),
        "--train",
        common::data("stsb/dev.parquet").to_str().unwrap(),
        "--loss",
        "cosine",
        "--max-steps",
        "1",
        "--out",
        d.path().join("bi").to_str().unwrap(),
    ]);
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        said.contains("trained with candle's graph (its activation is GeluNew"),
        "{said}"
    );
}
