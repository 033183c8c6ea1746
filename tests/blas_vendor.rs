//! The oneMKL path (the one chosen on Intel CPUs) on whatever CPU runs the tests: forced with
//! CONDENSER_BLAS=mkl, it must be the library loaded, named in summaries, and give the fixture's
//! sentence-transformers embeddings within 1e-5, as OpenBLAS does (tests/model_parity.rs). Its
//! own test binary: the BLAS is chosen once per process.
mod common;
use candle_core::Device;
use condenser::model::kernels::blas::{self, Vendor};
use condenser::model::SentenceEncoder;
use indicatif::ProgressBar;

#[test]
fn mkl_encodes_the_fixture_within_1e5() {
    // SAFETY: the only test in this binary, run before anything reads the environment
    unsafe { std::env::set_var("CONDENSER_BLAS", "mkl") };
    let b = blas::blas().expect("datasets/fetch.sh unpacks oneMKL into datasets/lib/mkl");
    assert_eq!(b.vendor, Vendor::Mkl);
    assert!(
        blas::describe().starts_with("oneMKL"),
        "{}",
        blas::describe()
    );
    let (sentences, want) = common::fixture_embeddings();
    let sentences: Vec<&str> = sentences.iter().map(String::as_str).collect();
    let enc = SentenceEncoder::load(&common::model(), &Device::Cpu).unwrap();
    let got = enc.encode(&sentences, 7, &ProgressBar::hidden()).unwrap();
    let rows: Vec<Vec<f32>> = (0..got.len()).map(|i| got.row(i).to_vec()).collect();
    let (_, max_diff) = common::worst_cosine_and_max_diff(&rows, &want);
    eprintln!("{}: max abs diff {max_diff:.2e}", blas::describe());
    assert!(max_diff < 1e-5, "max abs diff {max_diff}");
}
