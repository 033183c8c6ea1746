//! `condenser transfer-grid` and the file split behind it: the split is deterministic and
//! disjoint; a grid over two tiny domains (a tiny BERT the test builds) produces every cell and
//! its report; a grid killed mid-way resumes without redoing finished steps.
mod common;
use common::{condenser, data, tiny_bert};
use std::path::Path;
use std::process::{Command, Stdio};

fn ok(o: &std::process::Output) -> String {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "{text}");
    text
}

fn rows(p: &Path) -> Vec<(String, String)> {
    use arrow_array::cast::AsArray;
    let f = std::fs::File::open(p).unwrap();
    let r = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(f)
        .unwrap()
        .build()
        .unwrap();
    let mut out = Vec::new();
    for b in r {
        let b = b.unwrap();
        let (a, c) = (
            b.column_by_name("sentence1").unwrap(),
            b.column_by_name("sentence2").unwrap(),
        );
        for i in 0..b.num_rows() {
            out.push((
                a.as_string::<i32>().value(i).to_string(),
                c.as_string::<i32>().value(i).to_string(),
            ));
        }
    }
    out
}

#[test]
fn file_split_is_deterministic_and_disjoint() {
    let dir = tempfile::tempdir().unwrap();
    let input = data("medqp/all.parquet");
    let run = |seed: &str, out: &str| {
        ok(&condenser(&[
            "split",
            "--input",
            input.to_str().unwrap(),
            "--test-fraction",
            "0.2",
            "--seed",
            seed,
            "--out",
            dir.path().join(out).to_str().unwrap(),
        ]))
    };
    assert!(run("0", "a").contains("2438 train rows, 610 test rows"));
    run("0", "b");
    run("1", "c");
    let part = |d: &str, s: &str| rows(&dir.path().join(d).join(format!("{s}.parquet")));
    // the same seed: the same rows, byte for byte
    for s in ["train", "test"] {
        assert_eq!(
            std::fs::read(dir.path().join("a").join(format!("{s}.parquet"))).unwrap(),
            std::fs::read(dir.path().join("b").join(format!("{s}.parquet"))).unwrap()
        );
    }
    // disjoint, and together the whole file (as a multiset)
    let (train, test) = (part("a", "train"), part("a", "test"));
    let mut all = rows(&input);
    let mut both = [train.clone(), test.clone()].concat();
    all.sort();
    both.sort();
    assert_eq!(all, both);
    let train_set: std::collections::HashSet<_> = train.iter().collect();
    assert!(
        test.iter().all(|r| !train_set.contains(r)),
        "a pair is in both splits"
    );
    // another seed: another split of the same sizes
    assert_ne!(part("c", "test"), test);
    assert_eq!(part("c", "test").len(), 610);
    // a fraction that leaves a split empty is refused
    let o = condenser(&[
        "split",
        "--input",
        input.to_str().unwrap(),
        "--test-fraction",
        "1.5",
        "--out",
        dir.path().join("d").to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--test-fraction"));
}

#[test]
fn invert_label_turns_rte_around_and_refuses_scores() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rte.parquet");
    ok(&condenser(&[
        "convert",
        data("rte/dev.parquet").to_str().unwrap(),
        out.to_str().unwrap(),
        "--invert-label",
        "label",
    ]));
    let labels = |p: &Path| -> Vec<i64> {
        use arrow_array::cast::AsArray;
        let f = std::fs::File::open(p).unwrap();
        let r = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(f)
            .unwrap()
            .build()
            .unwrap();
        r.flat_map(|b| {
            let b = b.unwrap();
            b.column_by_name("label")
                .unwrap()
                .as_primitive::<arrow_array::types::Int64Type>()
                .values()
                .to_vec()
        })
        .collect()
    };
    let (before, after) = (labels(&data("rte/dev.parquet")), labels(&out));
    assert_eq!(before.len(), after.len());
    assert!(before.iter().zip(&after).all(|(a, b)| a + b == 1));
    // STSb's 0-5 score is not a label in [0, 1]: refused at its row and column
    let o = condenser(&[
        "convert",
        data("stsb/dev.parquet").to_str().unwrap(),
        dir.path().join("x.parquet").to_str().unwrap(),
        "--invert-label",
        "score",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("row 1, column 'score'"),
        "{err}"
    );
}

/// A grid file over two small slices of real data (STSb dev as an STS domain, MRPC test as a
/// binary one) with a tiny BERT: every step runs in seconds.
fn tiny_grid(dir: &Path) -> std::path::PathBuf {
    let model = tiny_bert(dir);
    for (name, src, n) in [
        ("sts", "stsb/dev.parquet", 120),
        ("para", "mrpc/test.parquet", 120),
    ] {
        for (split, seed) in [("train", "1"), ("test", "2")] {
            ok(&condenser(&[
                "convert",
                data(src).to_str().unwrap(),
                dir.join(format!("{name}-{split}.parquet"))
                    .to_str()
                    .unwrap(),
                "--columns",
                "sentence1,sentence2,label",
                "--sample",
                &n.to_string(),
                "--seed",
                seed,
            ]));
        }
    }
    let grid = dir.join("grid.toml");
    let d = dir.display();
    std::fs::write(
        &grid,
        format!(
            r#"[vars]
out = "{d}/out"
[grid]
model = "{model}"
target_pairs = 50
top_k = 2
batch_size = 8
[[domain]]
name = "sts"
train = "{d}/sts-train.parquet"
test = "{d}/sts-test.parquet"
task = "sts"
lr = 2e-5
warmup = 0.3
article = 0.889
[[domain]]
name = "para"
train = "{d}/para-train.parquet"
test = "{d}/para-test.parquet"
task = "classification"
lr = 5e-5
warmup = 0.35
"#,
            model = model.display()
        ),
    )
    .unwrap();
    grid
}

fn done_steps(out: &Path) -> Vec<String> {
    let Ok(t) = std::fs::read_to_string(out.join("recipe_state.json")) else {
        return Vec::new();
    };
    let Ok(v) = serde_json::from_str::<serde_json::Value>(&t) else {
        return Vec::new();
    };
    v["steps"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter(|(_, r)| r["status"] == "done")
                .map(|(k, _)| k.clone())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn tiny_grid_runs_every_cell_and_resumes_after_a_kill() {
    let dir = tempfile::tempdir().unwrap();
    let grid = tiny_grid(dir.path());
    let out = dir.path().join("out");
    // killed once six steps are done (the overlap, both samples, the first cross-encoder, ...)
    let mut child = Command::new(env!("CARGO_BIN_EXE_condenser"))
        .args(["transfer-grid", grid.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while done_steps(&out).len() < 6 {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the grid finished before it could be killed"
        );
        assert!(t0.elapsed().as_secs() < 300, "no progress");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let finished = done_steps(&out);
    let ce = out.join("cross-encoders/sts/model.safetensors");
    let ce_time = std::fs::metadata(&ce).unwrap().modified().unwrap();

    let text = ok(&condenser(&["transfer-grid", grid.to_str().unwrap()]));
    for name in &finished {
        assert!(
            text.contains(&format!("] {name}: done, skipped")),
            "{name} ran again:\n{text}"
        );
    }
    assert_eq!(std::fs::metadata(&ce).unwrap().modified().unwrap(), ce_time);

    // every cell, with every model scored, in the report
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report/grid.json")).unwrap())
            .unwrap();
    let cells = report["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 4);
    for c in cells {
        for k in [
            "jaccard",
            "zero_shot",
            "source_gold",
            "silver",
            "silver_aug",
            "in_domain_gold",
        ] {
            assert!(c[k].as_f64().is_some_and(f64::is_finite), "{k} of {c}");
        }
        let metric = if c["target"] == "sts" {
            "spearman_cosine"
        } else {
            "cosine_ap"
        };
        assert_eq!(c["metric"], metric);
        let gain = c["silver"].as_f64().unwrap() - c["zero_shot"].as_f64().unwrap();
        assert!((c["gain"].as_f64().unwrap() - gain).abs() < 1e-12);
    }
    // a domain overlaps itself fully; the two differ
    let diag = cells
        .iter()
        .find(|c| c["source"] == "sts" && c["target"] == "sts")
        .unwrap();
    assert_eq!(diag["jaccard"].as_f64(), Some(1.0));
    let off = cells
        .iter()
        .find(|c| c["source"] == "sts" && c["target"] == "para")
        .unwrap();
    assert!(off["jaccard"].as_f64().unwrap() < 0.5);
    // the sampled target pairs were labelled (50 of 120), plus 2 random partners a sentence
    let silver = rows(&out.join("silver/sts-to-para.parquet"));
    assert_eq!(silver.len(), 50);
    assert!(rows(&out.join("silver/sts-to-para-aug.parquet")).len() > 50);
    assert_eq!(report["sources"][0]["article"].as_f64(), Some(0.889));
    for f in [
        "grid.csv",
        "gain.svg",
        "gain_aug.png",
        "overlap_vs_gain.svg",
        "overlap_vs_gain_aug.png",
    ] {
        assert!(out.join("report").join(f).is_file(), "{f}");
    }
    // a finished grid re-runs nothing
    let again = ok(&condenser(&["transfer-grid", grid.to_str().unwrap()]));
    assert!(!again.contains(": runs ("), "{again}");
}
