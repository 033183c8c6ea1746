//! The settings' parser: every variable's values, the one error for a misspelt one.

use super::*;

fn read(pairs: &[(&str, &str)]) -> Result<Settings> {
    Settings::read(|k| {
        pairs
            .iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v.to_string())
    })
}

#[test]
fn unset_and_empty_are_the_defaults() {
    let d = read(&[]).unwrap();
    assert_eq!(d.engine, Switch::On);
    assert_eq!(d.gpu_engine, Switch::On);
    assert_eq!(
        (d.isa, d.f32_gemm, d.bf16),
        (None, F32Gemm::Auto, Bf16Setting::Auto)
    );
    assert_eq!(d.blas, BlasChoice::Auto);
    assert_eq!(
        read(&[("CONDENSER_ISA", " "), ("CONDENSER_BLAS", "")]).unwrap(),
        d
    );
}

#[test]
fn values_are_read_without_case_and_every_typo_is_named() {
    let s = read(&[
        ("CONDENSER_ENGINE", "Candle"),
        ("CONDENSER_ISA", "AVX2"),
        ("CONDENSER_BLAS", "skylakex"),
        ("CONDENSER_BF16", "avx512bf16"),
        ("CONDENSER_STRICT", "blas, avx2,"),
    ])
    .unwrap();
    assert_eq!(s.engine, Switch::Off);
    assert_eq!(s.isa, Some(IsaCap::Avx2));
    assert_eq!(s.blas, BlasChoice::Core("SkylakeX"));
    assert_eq!(s.bf16, Bf16Setting::Avx512Bf16);
    assert!(s.strict_about("avx2") && !s.strict_about("gpu"));
    for (name, valid) in [
        ("CONDENSER_ENGINE", "on (default), off"),
        ("CONDENSER_GPU_ENGINE", "on (default), off"),
        ("CONDENSER_ISA", "baseline, avx2, avx512"),
        ("CONDENSER_F32_GEMM", "auto (default), own, blas"),
        ("CONDENSER_BF16", "auto (default), mkl, own, avx512bf16"),
        ("CONDENSER_BLAS", "an OpenBLAS kernel name"),
        ("CONDENSER_INDEX_CHECKPOINT_SECS", "whole seconds"),
        ("CONDENSER_STRICT", "avx512bf16"),
    ] {
        let e = read(&[(name, "bogus")]).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("{name}=\"bogus\"")) && e.contains(valid),
            "{e}"
        );
    }
}

#[test]
fn docs_engine_md_lists_every_variable_as_this_table() {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/engine.md"),
    )
    .unwrap();
    for v in VARIABLES {
        let row = format!(
            "| `{}` | {} | {} |",
            v.name,
            v.values,
            v.about.replace("  ", "")
        );
        let row: String = row.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(doc.contains(&row), "docs/engine.md lacks the row\n{row}");
    }
}
