//! Paths to the real model and data that `datasets/fetch.sh` sets up. Tests that need them fail
//! with a clear message when they are missing: a skipped parity test would prove nothing.
#![allow(dead_code)]
use std::path::PathBuf;

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn require(p: PathBuf) -> PathBuf {
    assert!(
        p.exists(),
        "{} is missing: run `bash datasets/fetch.sh` first",
        p.display()
    );
    p
}

pub fn model() -> PathBuf {
    require(root().join("datasets/model/all-MiniLM-L6-v2"))
}

pub fn data(rel: &str) -> PathBuf {
    require(root().join("datasets/data").join(rel))
}

pub fn brown(genre: &str) -> PathBuf {
    require(
        root()
            .join("datasets/brown")
            .join(format!("{genre}.parquet")),
    )
}

pub fn fixture() -> serde_json::Value {
    let p = require(root().join("../shared/fixtures/reference-minilm.json"));
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// The four domains of the article, as the fixture names them.
pub fn four_domains() -> Vec<(&'static str, PathBuf)> {
    vec![
        ("stsb", data("stsb/train.parquet")),
        ("mrpc", data("mrpc/train.parquet")),
        ("rte", data("rte/train.parquet")),
        ("medqp", data("medqp/all.parquet")),
    ]
}
