//! Every CPU class this machine has, forced through the binary's environment (CONDENSER_ISA for
//! condenser's own kernels, CONDENSER_BLAS for OpenBLAS's: Haswell for AVX2+FMA, SkylakeX for
//! AVX-512), embeds like sentence-transformers and trains like the widest class. A class the CPU
//! lacks is skipped with its reason printed.
mod common;
use condenser::model::kernels::isa::{detected, Isa};

/// (CONDENSER_ISA, CONDENSER_BLAS, class) for each class, widest last. The baseline (SSE,
/// OpenBLAS's Nehalem kernel) runs on every x86-64, so each CPU compares at least two classes:
/// an AVX2-only CPU compared its widest class with itself before.
const CLASSES: [(&str, &str, Isa); 3] = [
    ("baseline", "nehalem", Isa::Baseline),
    ("avx2", "haswell", Isa::Avx2),
    ("avx512", "skylakex", Isa::Avx512),
];

fn classes() -> Vec<(&'static str, &'static str)> {
    let mut out = Vec::new();
    for (isa, blas, class) in CLASSES {
        if detected() >= class {
            out.push((isa, blas));
        } else {
            condenser::runtime::skipped(
                &format!("the {} class", class.name()),
                class.tag(),
                &format!("this CPU's widest class is {}", detected().name()),
            );
        }
    }
    out
}

fn condenser_at(isa: &str, blas: &str, args: &[&str]) -> String {
    let o = common::condenser_env(&[("CONDENSER_ISA", isa), ("CONDENSER_BLAS", blas)], args);
    assert!(
        o.status.success(),
        "{isa}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn every_class_embeds_like_sentence_transformers() {
    for (isa, blas) in classes() {
        let env = [("CONDENSER_ISA", isa), ("CONDENSER_BLAS", blas)];
        let (said, worst, max_diff) = common::fixture_run(&env, &[]);
        assert!(said.to_lowercase().contains(blas), "{isa}: {said}");
        assert!(
            worst > 0.999_999 && max_diff < 1e-5,
            "{isa}: worst cosine {worst}, max diff {max_diff}"
        );
    }
}

/// The losses of a few cross-encoder steps (through the engine), per class, against the widest's.
#[test]
fn every_class_trains_like_the_widest() {
    let d = tempfile::tempdir().unwrap();
    let losses = |isa: &str, blas: &str| -> Vec<f64> {
        let out = d.path().join(isa);
        let said = condenser_at(
            isa,
            blas,
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
                "6",
                "--threads",
                "1",
                "--out",
                out.to_str().unwrap(),
            ],
        );
        let class = CLASSES.iter().find(|c| c.0 == isa).unwrap().2;
        assert!(
            said.contains(&format!("engine, {}", class.name())),
            "{isa}: {said}"
        );
        common::train_log_losses(&out)
    };
    let runs: Vec<(&str, Vec<f64>)> = classes()
        .into_iter()
        .map(|(i, b)| (i, losses(i, b)))
        .collect();
    let (widest, want) = runs.last().unwrap();
    assert!(runs.len() >= 2, "one class compared with itself");
    for (isa, got) in &runs[..runs.len() - 1] {
        assert_eq!(got.len(), 6);
        for (a, b) in got.iter().zip(want) {
            assert!(
                (a - b).abs() <= 1e-4 * b.abs(),
                "{isa} vs {widest}: {got:?} vs {want:?}"
            );
        }
    }
}

/// Frozen Linears on condenser's f32 kernel (CONDENSER_F32_GEMM=own) and on the BLAS
/// (`blas`) both embed like sentence-transformers, and the summary says which ran.
#[test]
fn the_f32_kernel_and_the_blas_embed_alike() {
    if !condenser::model::kernels::f32_gemm::supported() {
        condenser::runtime::skipped(
            "condenser's f32 kernel",
            "avx2",
            "this CPU has no AVX2 + FMA",
        );
        return;
    }
    for route in ["own", "blas"] {
        let (said, worst, max_diff) = common::fixture_run(&[("CONDENSER_F32_GEMM", route)], &[]);
        assert_eq!(
            said.contains("condenser's f32 kernel"),
            route == "own",
            "{route}: {said}"
        );
        assert!(
            worst > 0.999_999 && max_diff < 1e-5,
            "{route}: worst cosine {worst}, max diff {max_diff}"
        );
    }
    // CONDENSER_ISA caps every kernel of condenser's: the baseline class takes the BLAS even
    // where CONDENSER_F32_GEMM=own asks for the AVX2 kernel
    let capped = [("CONDENSER_F32_GEMM", "own"), ("CONDENSER_ISA", "baseline")];
    let (said, worst, max_diff) = common::fixture_run(&capped, &[]);
    assert!(!said.contains("condenser's f32 kernel"), "baseline: {said}");
    assert!(
        worst > 0.999_999 && max_diff < 1e-5,
        "baseline: {worst} {max_diff}"
    );
}
