//! recipes/retrieval-adaptation.toml runs unchanged but for its variables on a BEIR-layout folder
//! (Cranfield rewritten as corpus.jsonl, queries.jsonl, qrels/test.tsv), here with a tiny BERT and
//! two seeds, through dev folds to the choice and its report; a second run skips every step; a run
//! with another test share sharing the first's label-free models trains only what needs labels.
mod common;

#[test]
fn retrieval_adaptation_recipe_chooses_on_dev_folds_and_reads_test_once() {
    let d = tempfile::tempdir().unwrap();
    let beir = common::beir_cranfield(d.path());
    let model = common::tiny_bert(d.path());
    let out = d.path().join("out");
    let recipe = common::root().join("recipes/retrieval-adaptation.toml");
    let sets = [
        format!("data={}", beir.display()),
        "name=beir".to_string(),
        format!("out={}", out.display()),
        format!("model={}", model.display()),
        "seeds=1 2".to_string(),
        "max_len=32".to_string(),
        "big_batch=64".to_string(),
        "extended=true".to_string(),
        // g's mechanics: its cross-encoder here learns from this very folder's judgments (a
        // development run names other collections)
        "gpl=true".to_string(),
        format!("source_root={}", d.path().display()),
        "sources=cranfield-beir".to_string(),
        "ce_negatives=2".to_string(),
        "also=pw,b,g".to_string(),
        // the built-in dev rule first; the shipped rules are applied below, on this run's own
        "use_rules=false".to_string(),
    ];
    let run_with = |extra: &[String]| {
        let mut args = vec!["run".to_string(), recipe.display().to_string()];
        for s in sets.iter().chain(extra) {
            args.extend(["--set".to_string(), s.clone()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        common::ok(common::condenser(&args))
    };
    let first = run_with(&[]);
    // Cranfield's 225 judged queries: half to test, the train half in three dev folds
    assert!(
        first.contains("112 train queries, 113 test queries"),
        "{first}"
    );
    for k in 0..3 {
        assert!(first.contains(&format!("dev/fold-{k}/qrels")), "{first}");
    }
    // the dev evaluations score queries one by one: what the choice pairs
    for eval in ["dev/eval", "dev/eval-f0"] {
        assert!(out.join(eval).join("per_query.csv").is_file(), "{eval}");
    }
    let md = std::fs::read_to_string(out.join("report/report.md")).unwrap();
    assert!(
        md.contains("Dev cosine_ndcg@10") && md.contains("Chosen: "),
        "{md}"
    );
    assert!(md.contains("| tiny (stock) | 1 |"), "{md}");
    // label-free methods a row of two seeds, label methods one dev seed over three folds, each
    // with the wall time of its runs
    for (method, seeds) in [
        ("p", 2),
        ("pw", 2),
        ("f", 2),
        ("c", 2),
        ("g", 2),
        ("b", 1),
        ("pb", 1),
        ("bw", 1),
    ] {
        let row = md
            .lines()
            .find(|l| {
                l.starts_with(&format!("| {method} | {seeds} |"))
                    || l.starts_with(&format!("| {method} (chosen) | {seeds} |"))
            })
            .unwrap_or_else(|| panic!("no dev row for {method}: {md}"));
        assert!(row.trim_end().ends_with(" s |"), "{row}");
    }
    // test: the stock model, the chosen method and the named ones (pw, b, g), two seeds each,
    // and each one's gain paired over the test queries with its wins and losses
    let test = &md[md.find("Test, read once").expect("a test section")..];
    assert!(test.contains("| tiny (baseline) | 1 |"), "{test}");
    for method in ["pw", "b", "g"] {
        assert!(
            test.lines()
                .any(|l| l.starts_with(&format!("| {method} | 2 |"))),
            "{method}: {test}"
        );
    }
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report/report.json")).unwrap())
            .unwrap();
    assert!(json["dev"]["chosen"].is_string(), "{json}");
    assert_eq!(json["chosen"]["method"], json["dev"]["chosen"], "{json}");
    // what each dev gain rests on (issue 82): its queries won and lost, a median, a bootstrap
    // bound, and the label methods' gain on each of the three folds
    for row in json["dev"]["candidates"].as_array().expect("dev rows") {
        let e = &row["evidence"];
        let (won, lost, n) = (&e["won"], &e["lost"], &row["queries"]);
        assert!(
            won.as_u64().unwrap() + lost.as_u64().unwrap() <= n.as_u64().unwrap(),
            "{row}"
        );
        assert!(e["median"].is_f64() && e["bootstrap_low"].is_f64(), "{row}");
        if ["b", "pb", "bw"].contains(&row["method"].as_str().unwrap()) {
            assert_eq!(e["folds"].as_array().map(Vec::len), Some(3), "{row}");
        }
    }
    let gains = json["test_gains"].as_array().expect("test gains");
    assert!(gains.len() >= 3, "{json}");
    for g in gains {
        let (won, lost, n) = (&g["wins"], &g["losses"], &g["queries"]);
        assert_eq!(n.as_u64(), Some(113), "{g}");
        assert!(won.as_u64().unwrap() + lost.as_u64().unwrap() <= 113, "{g}");
    }
    // test's scores query by query, what `condenser loco` reads of a development collection
    assert!(out.join("report/test/per_query.csv").is_file());
    // every evaluation shares one vector cache (issue 82): each model's corpus vectors are
    // computed once, the stock model's on every dev fold and test, p's and pw's on train and
    // test, so the cache holds one file per model evaluated, however often it was evaluated
    let mut models = std::collections::BTreeSet::new();
    let mut evaluations = 0;
    for eval in [
        "dev/eval",
        "dev/eval-g",
        "dev/eval-f0",
        "dev/eval-f1",
        "dev/eval-f2",
    ]
    .iter()
    .map(|e| out.join(e))
    .chain([out.join("report/test")])
    {
        let csv = std::fs::read_to_string(eval.join("results.csv")).unwrap();
        let these: std::collections::BTreeSet<&str> = (csv.lines().skip(1))
            .filter_map(|l| l.split(',').next())
            .collect();
        evaluations += these.len();
        models.extend(these.into_iter().map(String::from));
    }
    let files = std::fs::read_dir(out.join("vectors")).unwrap().count();
    assert_eq!(files, models.len(), "{models:?}");
    // reused: the stock model 5 times (dev-g, three folds, test), pw's and g's two seeds on test
    assert!(
        evaluations >= files + 9,
        "{evaluations} evaluations, {files} files"
    );
    for f in ["report.svg", "report.png"] {
        assert!(out.join("report").join(f).is_file(), "{f}");
    }
    // the run as a development collection: loco over three copies of it agrees with itself, and
    // its shipped rules, applied by choose, name the pick with labels and the one without
    let loco = d.path().join("loco");
    let named: Vec<String> = ["x", "y", "z"]
        .iter()
        .map(|n| format!("--collection={n}={}", out.display()))
        .collect();
    let refused = common::err(common::condenser(&[
        "loco",
        &named[0],
        &named[1],
        &named[2],
        "--out",
        &d.path().join("refused").display().to_string(),
    ]));
    assert!(
        refused.contains("collection x: p lacks dev figures or test scores"),
        "{refused}"
    );
    let mut args: Vec<&str> = vec!["loco", "--label-free", "pw,g", "--labels", "b", "--out"];
    let loco_s = loco.display().to_string();
    args.push(&loco_s);
    args.extend(named.iter().map(String::as_str));
    let table = common::ok(common::condenser(&args));
    assert!(
        table.contains("### with labels: each collection left out in turn"),
        "{table}"
    );
    assert!(table.contains("| g | x "), "{table}");
    let shipped: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(loco.join("loco.json")).unwrap()).unwrap();
    let zero = &shipped["settings"][0]["shipped"];
    assert_eq!(zero["rule"], "always", "{shipped}");
    let (base, rules) = (model.display().to_string(), loco.join("loco.json"));
    let (rules, ruled) = (rules.display().to_string(), d.path().join("ruled"));
    let ruled_s = ruled.display().to_string();
    let models_s = out.display().to_string();
    let test_set = format!("t={}", out.join("data").display());
    let mut args = vec![
        "choose",
        "--baseline",
        &base,
        "--rule-from",
        &rules,
        "--models",
    ];
    args.extend([
        models_s.as_str(),
        "--retrieval",
        &test_set,
        "--out",
        &ruled_s,
    ]);
    let devs: Vec<String> = ["eval", "eval-g", "eval-f0", "eval-f1", "eval-f2"]
        .iter()
        .map(|e| {
            format!(
                "--dev={}",
                out.join("dev").join(e).join("results.csv").display()
            )
        })
        .collect();
    args.extend(devs.iter().map(String::as_str));
    common::ok(common::condenser(&args));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(ruled.join("report.json")).unwrap()).unwrap();
    // a shipped rule names the starting model `stock`; choose reports it by this run's name
    let want = match zero["method"].as_str() {
        Some("stock") => "tiny",
        m => m.expect("a method"),
    };
    assert_eq!(json["label_free"]["method"], want, "{json}");
    assert!(json["label_free"]["test"]["gain"].is_number(), "{json}");
    assert!(
        json["chosen"]["why"].as_str().unwrap().contains("x, y, z"),
        "{json}"
    );
    let md = std::fs::read_to_string(ruled.join("report.md")).unwrap();
    // each candidate's dev-test agreement over the three (identical) development runs
    for m in ["pw", "g", "b"] {
        let row = md
            .lines()
            .find(|l| l.starts_with(&format!("| {m} | ")) && l.ends_with(" of 3 |"));
        assert!(row.is_some(), "{m}: {md}");
    }

    let second = run_with(&[]);
    assert!(
        !second.contains(": runs ("),
        "a finished recipe runs nothing again: {second}"
    );
    let other = d.path().join("other");
    let third = run_with(&[
        "test_fraction=0.3".to_string(),
        format!("out={}", other.display()),
        format!("unlabelled={}", out.display()),
    ]);
    assert!(
        third.contains("157 train queries, 68 test queries"),
        "{third}"
    );
    for shared in [
        "pseudo-pairs",
        "p[seed=1]",
        "pw[seed=2]",
        "f[seed=2]",
        "c[seed=1]",
    ] {
        assert!(
            third.contains(&format!("{shared}: outputs exist")),
            "{shared}: {third}"
        );
    }
    assert!(third.contains("pb-dev[fold=2,seed=1]: runs"), "{third}");
}
