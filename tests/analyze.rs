//! `condenser analyze attention` on real sentences: one column per model, one row per layer,
//! entropies bounded by uniform attention, and a random BERT (near-uniform attention) far above a
//! trained one.
mod common;
use std::process::Command;

#[test]
fn cls_attention_entropy_per_layer_for_several_models() {
    let d = tempfile::tempdir().unwrap();
    let tiny = common::tiny_bert(d.path());
    let out = d.path().join("attn");
    let o = Command::new(env!("CARGO_BIN_EXE_condenser"))
        .args(["analyze", "attention", "--model"])
        .arg(common::model())
        .arg("--model")
        .arg(&tiny)
        .arg("--texts")
        .arg(common::brown("news"))
        .args(["--limit", "60", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8_lossy(&o.stdout);
    let uniform: f64 = stdout
        .split("uniform = ")
        .nth(1)
        .and_then(|s| s.split(')').next())
        .unwrap()
        .parse()
        .unwrap();
    let csv = std::fs::read_to_string(out.join("attention_entropy.csv")).unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(header.len(), 3, "{header:?}");
    let rows: Vec<Vec<Option<f64>>> = lines
        .map(|l| l.split(',').skip(1).map(|v| v.parse().ok()).collect())
        .collect();
    assert_eq!(rows.len(), 6, "MiniLM's six layers");
    for (l, r) in rows.iter().enumerate() {
        let minilm = r[0].unwrap();
        assert!(
            minilm > 0.0 && minilm < uniform,
            "layer {}: {minilm}",
            l + 1
        );
    }
    // the tiny random BERT has two layers whose attention is nearly uniform
    for r in &rows[..2] {
        let random = r[1].unwrap();
        assert!(
            random > 0.9 * uniform && random <= uniform + 1e-6,
            "{random}"
        );
    }
    assert!(rows[2][1].is_none());
    assert!(
        rows[1][0].unwrap() < 0.5 * uniform,
        "trained MiniLM's [CLS] focuses in layer 2"
    );
    assert!(
        out.join("attention_entropy.svg").is_file() && out.join("attention_entropy.png").is_file()
    );
    // a missing text file is named
    let o = Command::new(env!("CARGO_BIN_EXE_condenser"))
        .args(["analyze", "attention", "--model"])
        .arg(&tiny)
        .args(["--texts", "no/such.txt", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("no/such.txt"));
}
