//! Acceptance for `domain-overlap`: exact parity with the article's Python method (the fixture),
//! and the MinHash estimate's accuracy, on the four real domains.
mod common;
use condenser::overlap::{self, Mode, Options, OverlapReport, Source};
use condenser::tokenize::Tokenizer;
use indicatif::ProgressBar;

fn sources() -> Vec<Source> {
    common::four_domains()
        .into_iter()
        .map(|(n, p)| Source {
            name: n.into(),
            path: p,
            columns: vec!["sentence1".into(), "sentence2".into()],
        })
        .collect()
}

fn run(stride: usize, mode: Mode) -> OverlapReport {
    let tok = Tokenizer::load(&common::model()).unwrap();
    overlap::compute(
        &sources(),
        &tok,
        &Options {
            ngram: 2,
            stride,
            mode,
        },
        &ProgressBar::hidden(),
    )
    .unwrap()
}

fn round6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

fn assert_matches_fixture(report: &OverlapReport, key: &str) {
    let fx = &common::fixture()[key];
    let order: Vec<&str> = fx["order"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(report.names, order);
    for (i, a) in order.iter().enumerate() {
        assert_eq!(
            report.sizes[i].1,
            fx["sizes"][a].as_u64().unwrap(),
            "{key}: size of {a}"
        );
        for (j, b) in order.iter().enumerate() {
            let want = fx["matrix"][a][b].as_f64().unwrap();
            assert_eq!(round6(report.jaccard[i][j]), want, "{key}: J({a},{b})");
        }
    }
}

#[test]
fn exact_sliding_bigrams_match_fixture() {
    assert_matches_fixture(&run(1, Mode::Exact), "bigram_jaccard_sliding");
}

#[test]
fn exact_article_bigrams_match_fixture() {
    assert_matches_fixture(&run(2, Mode::Exact), "bigram_jaccard_article");
}

#[test]
fn minhash_256_estimates_exact_matrix() {
    let exact = run(1, Mode::Exact);
    let approx = run(
        1,
        Mode::Approx {
            num_perm: 256,
            seed: 1,
        },
    );
    let se = &approx.approx.as_ref().unwrap().stderr;
    for (i, se_row) in se.iter().enumerate() {
        assert!(
            (approx.sizes[i].1 as f64 / exact.sizes[i].1 as f64 - 1.0).abs() < 0.3,
            "size estimate {i}"
        );
        for (j, &se_ij) in se_row.iter().enumerate() {
            let err = (approx.jaccard[i][j] - exact.jaccard[i][j]).abs();
            assert!(
                err <= 0.02,
                "J[{i}][{j}] {} vs exact {}",
                approx.jaccard[i][j],
                exact.jaccard[i][j]
            );
            assert!(se_ij < 0.03);
        }
    }
}

/// The estimator is unbiased with the stated standard error: over many seeds, the mean error is
/// small and errors beyond 3 standard errors are rare (a statistical check, not one lucky seed).
#[test]
fn minhash_error_follows_its_standard_error() {
    let exact = run(1, Mode::Exact);
    let k = 128;
    let (mut beyond3, mut total, mut sum_err) = (0, 0, 0.0);
    for seed in 0..24 {
        let approx = run(1, Mode::Approx { num_perm: k, seed });
        for i in 0..4 {
            for j in (i + 1)..4 {
                let want = exact.jaccard[i][j];
                let err = approx.jaccard[i][j] - want;
                sum_err += err;
                total += 1;
                if err.abs() > 3.0 * overlap::standard_error(want, k) {
                    beyond3 += 1;
                }
            }
        }
    }
    assert!(
        beyond3 <= 2,
        "{beyond3} of {total} estimates beyond 3 standard errors"
    );
    assert!(
        (sum_err / total as f64).abs() < 0.01,
        "mean error {}",
        sum_err / total as f64
    );
}

#[test]
fn cli_writes_json_csv_svg_png() {
    let out = tempfile::tempdir().unwrap();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_condenser"));
    cmd.arg("domain-overlap")
        .arg("--tokenizer")
        .arg(common::model())
        .arg("--stride")
        .arg("2")
        .arg("--out")
        .arg(out.path());
    for (n, p) in common::four_domains() {
        cmd.arg(format!("{n}={}", p.display()));
    }
    let o = cmd.output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let table = String::from_utf8(o.stdout).unwrap();
    assert!(
        table.contains("0.172825"),
        "terminal table shows the matrix:\n{table}"
    );
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.path().join("overlap.json")).unwrap()).unwrap();
    assert_eq!(
        json["names"],
        serde_json::json!(["stsb", "mrpc", "rte", "medqp"])
    );
    assert_eq!(json["sizes"]["medqp"], 25862);
    assert_eq!(
        (json["ngram"].as_u64(), json["stride"].as_u64()),
        (Some(2), Some(2))
    );
    assert_eq!(round6(json["jaccard"][0][3].as_f64().unwrap()), 0.040022);
    let csv = std::fs::read_to_string(out.path().join("overlap.csv")).unwrap();
    assert!(
        csv.starts_with("dataset,size,stsb,mrpc,rte,medqp\nstsb,36687,1.000000,0.172825"),
        "{csv}"
    );
    // the labels and values are SVG text (line breaks around text content do not matter)
    let svg = std::fs::read_to_string(out.path().join("overlap.svg"))
        .unwrap()
        .replace('\n', "");
    assert!(svg.contains(">medqp</text>") && svg.contains(">0.040</text>"));
    let png = std::fs::read(out.path().join("overlap.png")).unwrap();
    assert_eq!(&png[1..4], b"PNG");
}
