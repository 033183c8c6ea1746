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
