//! recipes/retrieval-adaptation.toml runs unchanged but for its variables on a BEIR-layout folder
//! (Cranfield rewritten as corpus.jsonl, queries.jsonl, qrels/test.tsv), here with a tiny BERT,
//! two seeds and 20 train queries, through to its report; a second run skips every step; a run
//! with 10 train queries sharing the first's label-free models trains only what needs labels.
mod common;

#[test]
fn retrieval_adaptation_recipe_runs_on_a_beir_folder_through_its_report() {
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
        "train_queries=20".to_string(),
        "seeds=1 2".to_string(),
        "max_len=32".to_string(),
        "big_batch=64".to_string(),
        "huge_batch=128".to_string(),
        "long_epochs=2".to_string(),
        "extended=true".to_string(),
    ];
    let run_with = |extra: &[String]| {
        let mut args = vec!["run".to_string(), recipe.display().to_string()];
        for s in sets.iter().chain(extra) {
            args.extend(["--set".to_string(), s.clone()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = common::condenser(&args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let run = || run_with(&[]);
    let first = run();
    assert!(first.contains("20 train queries"), "{first}");
    let md = std::fs::read_to_string(out.join("report/report.md")).unwrap();
    assert!(md.contains("cosine_ndcg@10 on beir-test"), "{md}");
    assert!(md.contains("| tiny (baseline) | 1 |"), "{md}");
    for method in [
        "b-mnr",
        "p-pseudo",
        "pb-pseudo-then-labels",
        "f-cached-pseudo",
        "b-mnr-long",
        "pb-pseudo-then-labels-long",
        "g-cached-pseudo-huge",
        "c-condenser",
        "cb-condenser-then-labels",
    ] {
        let row = md
            .lines()
            .find(|l| l.starts_with(&format!("| {method} | 2 |")))
            .unwrap_or_else(|| panic!("no 2-seed row for {method}: {md}"));
        // mean +- sd, and the recipe's own wall time of each run
        assert!(
            row.contains(" +- ") && row.trim_end().ends_with(" s |"),
            "{row}"
        );
    }
    for f in ["report.json", "report.svg", "report.png"] {
        assert!(out.join("report").join(f).is_file(), "{f}");
    }
    let second = run();
    assert!(
        !second.contains(": runs ("),
        "a finished recipe runs nothing again: {second}"
    );
    let out10 = d.path().join("out10");
    let third = run_with(&[
        "train_queries=10".to_string(),
        format!("out={}", out10.display()),
        format!("unlabelled={}", out.display()),
    ]);
    for shared in [
        "pseudo-pairs",
        "p-pseudo[seed=1]",
        "g-cached-pseudo-huge[seed=2]",
        "c-condenser[seed=1]",
    ] {
        assert!(
            third.contains(&format!("{shared}: outputs exist")),
            "{shared}: {third}"
        );
    }
    assert!(
        third.contains("cb-condenser-then-labels[seed=1]: runs"),
        "{third}"
    );
    let md = std::fs::read_to_string(out10.join("report/report.md")).unwrap();
    assert!(
        md.lines().any(|l| l.starts_with("| p-pseudo | 2 |")),
        "{md}"
    );
}
