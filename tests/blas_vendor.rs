//! The oneMKL paths (the ones chosen on Intel CPUs) on whatever CPU runs the tests, forced through
//! the binary's environment: CONDENSER_BLAS=mkl must load oneMKL, say so, and embed the fixture as
//! sentence-transformers does (within 1e-5, as OpenBLAS: tests/model_parity.rs); CONDENSER_BF16=mkl
//! must run bf16 products on oneMKL's bf16 GEMM (AMX where the CPU has it) with bf16's fidelity,
//! and train as condenser's own bf16 kernel does.
mod common;
use common::{condenser_env, fixture_run};

#[test]
fn mkl_encodes_the_fixture_within_1e5() {
    let (said, _, max_diff) = fixture_run(&[("CONDENSER_BLAS", "mkl")], &[]);
    assert!(
        said.contains("oneMKL"),
        "datasets/fetch.sh unpacks oneMKL into datasets/lib/mkl: {said}"
    );
    eprintln!("oneMKL: max abs diff {max_diff:.2e}");
    assert!(max_diff < 1e-5, "max abs diff {max_diff}");
}

#[test]
fn mkl_bf16_gemm_has_bf16_fidelity_and_trains_like_the_own_kernel() {
    let mkl = [("CONDENSER_BLAS", "mkl"), ("CONDENSER_BF16", "mkl")];
    let (said, worst, max_diff) = fixture_run(&mkl, &["--dtype", "bf16"]);
    assert!(said.contains("oneMKL's bf16 GEMM"), "{said}");
    eprintln!("oneMKL bf16: worst cosine {worst:.6}, max abs diff {max_diff:.2e}");
    assert!(
        worst >= 0.999 && max_diff > 1e-4,
        "worst cosine {worst}, max diff {max_diff} (bf16, not f32)"
    );
    if !condenser::model::kernels::bf16::supported() {
        condenser::runtime::skipped(
            "oneMKL bf16 against the own kernel",
            "avx512bf16",
            "this CPU has no AVX512-BF16 for the own kernel",
        );
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let losses = |env: &[(&str, &str)], name: &str| -> Vec<f64> {
        let out = d.path().join(name);
        let o = condenser_env(
            env,
            &[
                "train-cross-encoder",
                "--model",
                common::model().to_str().unwrap(),
                "--train",
                common::data("stsb/dev.parquet").to_str().unwrap(),
                "--max-seq-length",
                "64",
                "--batch-size",
                "8",
                "--max-steps",
                "5",
                "--threads",
                "1",
                "--precision",
                "bf16",
                "--out",
                out.to_str().unwrap(),
            ],
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        common::train_log_losses(&out)
    };
    let (ours, theirs) = (
        losses(&[("CONDENSER_BF16", "own")], "own"),
        losses(&mkl, "mkl"),
    );
    for (a, b) in ours.iter().zip(&theirs) {
        assert!(
            (a - b).abs() <= 1e-3 * a.abs(),
            "own kernel {ours:?} vs oneMKL {theirs:?}"
        );
    }
}
