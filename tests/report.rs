//! `condenser report`: methods over seeds from evaluate's results.csv, with a recipe's wall times.
mod common;

#[test]
fn report_writes_table_json_and_chart_with_wall_times() {
    let d = tempfile::tempdir().unwrap();
    let csv = d.path().join("results.csv");
    let mut rows = String::from("model,dataset,task,metric,value\n");
    for (m, v) in [
        ("base/zero", 0.30),
        ("o/a-s1", 0.33),
        ("o/a-s2", 0.35),
        ("o/a-s3", 0.34),
    ] {
        rows +=
            &format!("{m},set,retrieval,cosine_ndcg@10,{v}\n{m},set,retrieval,cosine_mrr@10,0.5\n");
    }
    std::fs::write(&csv, rows).unwrap();
    // a recipe state as `condenser run` writes it: the step that wrote o/a-s1 took 12 s
    let state = d.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    std::fs::write(
        state.join("recipe_state.json"),
        r#"{"steps": {"a[seed=1]": {"status": "done", "args": [], "out": "o/a-s1", "seconds": 12.0}}}"#,
    )
    .unwrap();
    let out = d.path().join("report");
    let report = |extra: &[&str]| {
        let mut args = vec![
            "report",
            "--results",
            csv.to_str().unwrap(),
            "--dataset",
            "set",
        ];
        args.extend_from_slice(&["--out", out.to_str().unwrap()]);
        args.extend_from_slice(extra);
        common::condenser(&args)
    };
    let o = report(&[
        "--baseline",
        "base/zero",
        "--state",
        state.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("| zero (baseline) | 1 | 0.3000 |"), "{md}");
    assert!(
        md.contains("| a | 3 | 0.3400 +- 0.0100 | +0.0400 | yes | 12 s |"),
        "{md}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(json["methods"][0]["values"].as_array().unwrap().len(), 3);
    for f in ["report.svg", "report.png"] {
        assert!(std::fs::metadata(out.join(f)).unwrap().len() > 1000, "{f}");
    }
    // a metric that is not there is an error, not an empty report
    let o = report(&["--metric", "ndcg"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("'ndcg'"), "{err}");
}

/// `pick` chooses the learning rate whose models score the highest dev mean, writes it, and a
/// training run reads it back with --lr-from (saying so, and training at it); a test split is
/// refused as the dataset, and --lr beside --lr-from is a conflict.
#[test]
fn pick_chooses_on_dev_and_training_reads_the_choice() {
    let d = tempfile::tempdir().unwrap();
    let csv = d.path().join("results.csv");
    let mut rows = String::from("model,dataset,task,metric,value\n");
    for (m, v) in [
        ("a-s1", 0.60),
        ("a-s2", 0.66),
        ("b-s1", 0.64),
        ("b-s2", 0.65),
    ] {
        rows += &format!(
            "{m},stsb-dev,sts,spearman_cosine,{v}\n{m},stsb-test,sts,spearman_cosine,0.9\n"
        );
    }
    std::fs::write(&csv, rows).unwrap();
    let choice = d.path().join("lr.json");
    let pick = |dataset: &str| {
        common::condenser(&[
            "pick",
            "--results",
            csv.to_str().unwrap(),
            "--setting",
            "lr",
            "--dataset",
            dataset,
            "--candidate",
            "1e-4=a-s1",
            "--candidate",
            "1e-4=a-s2",
            "--candidate",
            "3e-4=b-s1",
            "--candidate",
            "3e-4=b-s2",
            "--out",
            choice.to_str().unwrap(),
        ])
    };
    let o = pick("stsb-test");
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("never on a test split"));
    assert!(!choice.exists());
    let o = pick("stsb-dev");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let c = condenser::study::pick::Choice::load(&choice, "lr").unwrap();
    assert_eq!(c.value, "3e-4");
    assert!(condenser::study::pick::Choice::load(&choice, "epochs").is_err());
    // a bi-encoder trained with the choice: 4 STSb pairs, one step of batch 4, no warm-up
    let tiny = common::tiny_bert(d.path());
    let train = d.path().join("pairs.parquet");
    let o = common::condenser(&[
        "convert",
        common::data("stsb/dev.parquet").to_str().unwrap(),
        train.to_str().unwrap(),
        "--sample",
        "4",
        "--columns",
        "sentence1,sentence2,label",
    ]);
    assert!(o.status.success());
    let out = d.path().join("bi");
    let train_args = |lr: &[&str]| {
        let mut a = vec![
            "train-biencoder",
            "--init",
            tiny.to_str().unwrap(),
            "--train",
            train.to_str().unwrap(),
            "--loss",
            "cosine",
            "--batch-size",
            "4",
            "--warmup",
            "0",
            "--out",
            out.to_str().unwrap(),
            "--lr-from",
            choice.to_str().unwrap(),
        ];
        a.extend_from_slice(lr);
        common::condenser(&a)
    };
    let o = train_args(&["--lr", "1e-3"]);
    assert!(!o.status.success());
    let o = train_args(&[]);
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        said.contains("note: learning rate 0.0003, chosen on stsb-dev"),
        "{said}"
    );
    let log = std::fs::read_to_string(out.join("train_log.csv")).unwrap();
    let lr: f64 = log
        .lines()
        .nth(1)
        .unwrap()
        .split(',')
        .nth(2)
        .unwrap()
        .parse()
        .unwrap();
    assert!((lr - 3e-4).abs() < 1e-12, "trained at {lr}");
}
