//! The approximate index (`condenser index`, `--index`): on a set no larger than the candidates
//! asked for, its results are exact search's (the candidates are every document, scored exactly);
//! mining and evaluation through it agree with exact; an index of other or changed embeddings,
//! or an unfinished one, is refused; a killed build resumes from its checkpoint.
mod common;
use common::{condenser, data, err, minilm_layers, ok};
use std::collections::HashMap;
use std::path::Path;

/// Per query: (doc, score) best first.
fn run(path: &Path) -> HashMap<String, Vec<(String, f32)>> {
    let mut out: HashMap<String, Vec<(String, f32)>> = HashMap::new();
    for b in condenser::data::open(path, &["query_id", "doc_id", "score"]).unwrap() {
        let b = b.unwrap();
        let (q, d, s) = (
            b.ids("query_id").unwrap(),
            b.ids("doc_id").unwrap(),
            b.labels("score").unwrap(),
        );
        for i in 0..q.len() {
            out.entry(q[i].clone())
                .or_default()
                .push((d[i].clone(), s[i] as f32));
        }
    }
    out
}

#[test]
fn index_search_equals_exact_where_k_covers_the_set_and_stale_indexes_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let model = minilm_layers(dir.path(), 1);
    let (m, cran) = (model.to_str().unwrap(), data("cranfield"));
    let cran = cran.to_str().unwrap();
    let emb = dir.path().join("corpus-emb.parquet");
    let e = emb.to_str().unwrap();
    let len = ["--max-seq-length", "64"];
    let encode = |max_len: &str| {
        let a = [
            "encode",
            "--model",
            m,
            "--input",
            cran,
            "--out",
            e,
            "--max-seq-length",
            max_len,
        ];
        ok(condenser(&a));
    };
    encode("64");
    let index = dir.path().join("corpus-emb.usearch");
    let msg = ok(condenser(&["index", "--corpus-embeddings", e]));
    assert!(msg.contains("indexed 1400 vectors"), "{msg}");
    assert!(index.exists() && dir.path().join("corpus-emb.usearch.json").exists());
    let ix = index.to_str().unwrap();

    // top 1,400 of 1,400 documents: every document is a candidate, so the index gives exact
    // search's lists (the same documents, the same scores in the same order)
    let search = |out: &Path, extra: &[&str]| {
        let mut a = vec![
            "search",
            "--corpus-embeddings",
            e,
            "--model",
            m,
            "--queries",
            cran,
        ];
        a.extend_from_slice(&["--top-k", "1400", "--out", out.to_str().unwrap()]);
        a.extend_from_slice(&len);
        a.extend_from_slice(extra);
        ok(condenser(&a))
    };
    let (exact, approx) = (
        dir.path().join("exact.parquet"),
        dir.path().join("ann.parquet"),
    );
    search(&exact, &[]);
    let msg = search(&approx, &["--index", ix]);
    assert!(msg.contains("index candidates"), "{msg}");
    let (x, y) = (run(&exact), run(&approx));
    assert_eq!(x.len(), 225);
    for (q, a) in &x {
        let b = &y[q];
        assert_eq!(a.len(), 1400, "query {q}");
        assert_eq!(b.len(), 1400, "query {q}: the index missed documents");
        let mut da: Vec<&String> = a.iter().map(|h| &h.0).collect();
        let mut db: Vec<&String> = b.iter().map(|h| &h.0).collect();
        let same_order = da == db;
        da.sort();
        db.sort();
        assert_eq!(da, db, "query {q}");
        // scores rank by rank (BLAS's sum and a plain dot may differ in the last bit, so only
        // near-equal scores may trade places)
        for (r, (ha, hb)) in a.iter().zip(b).enumerate() {
            assert!(
                (ha.1 - hb.1).abs() < 1e-5,
                "query {q} rank {r}: {ha:?} {hb:?}"
            );
        }
        assert!(same_order || a.windows(2).any(|w| (w[0].1 - w[1].1).abs() < 1e-5));
    }

    // mining and evaluation through the index (twice k candidates, a graph walk of 128, on
    // 1,400 documents): approximate (the graph is built in parallel, so runs differ), so nearly
    // exact search's negatives (measured 98.6-100% of rows) and nDCG
    let mine = |out: &Path, extra: &[&str]| {
        let mut a = vec![
            "mine",
            "--model",
            m,
            "--retrieval",
            cran,
            "--num-negatives",
            "3",
        ];
        a.extend_from_slice(&["--corpus-embeddings", e, "--out", out.to_str().unwrap()]);
        a.extend_from_slice(&len);
        a.extend_from_slice(extra);
        ok(condenser(&a));
        let cols = [
            "anchor",
            "positive",
            "negative_1",
            "negative_2",
            "negative_3",
        ];
        let mut rows = Vec::new();
        for b in condenser::data::open(out, &cols).unwrap() {
            let b = b.unwrap();
            let c: Vec<Vec<String>> = cols.iter().map(|c| b.ids(c).unwrap()).collect();
            rows.extend(
                (0..b.num_rows()).map(|i| c.iter().map(|c| c[i].clone()).collect::<Vec<_>>()),
            );
        }
        rows
    };
    let a = mine(&dir.path().join("m1.parquet"), &[]);
    let b = mine(&dir.path().join("m2.parquet"), &["--index", ix]);
    assert!(a.len() > 100);
    let same = a.iter().zip(&b).filter(|(x, y)| x == y).count();
    assert!(
        a.len() == b.len() && same * 100 >= a.len() * 95,
        "{same} of {} rows",
        a.len()
    );
    let eval = |out: &str, extra: &[&str]| {
        let set = format!("cran={cran}");
        let out = dir.path().join(out);
        let mut a = vec![
            "evaluate",
            "--model",
            m,
            "--retrieval",
            &set,
            "--corpus-embeddings",
            e,
        ];
        a.extend_from_slice(&["--out", out.to_str().unwrap()]);
        a.extend_from_slice(&len);
        a.extend_from_slice(extra);
        ok(condenser(&a));
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap())
                .unwrap();
        let text = json.to_string();
        let at = text.find("cosine_ndcg@10\":").expect("ndcg in results") + 16;
        text[at..]
            .split([',', '}'])
            .next()
            .unwrap()
            .parse::<f64>()
            .unwrap()
    };
    let (n1, n2) = (eval("e1", &[]), eval("e2", &["--index", ix]));
    assert!(n1 > 0.05 && (n1 - n2).abs() < 5e-3, "{n1} {n2}");

    // embeddings re-made at another length: the index is stale, and says so
    let refused = || {
        let x = dir.path().join("x.parquet");
        let a = [
            "search",
            "--corpus-embeddings",
            e,
            "--query-embeddings",
            e,
            "--index",
            ix,
        ];
        err(condenser(
            &[&a[..], &["--top-k", "5", "--out", x.to_str().unwrap()]].concat(),
        ))
    };
    encode("32");
    let msg = refused();
    assert!(
        msg.contains("corpus-emb.usearch") && msg.contains("build it again"),
        "{msg}"
    );
    // an index without its description (an unfinished build) is never used
    encode("64");
    std::fs::remove_file(dir.path().join("corpus-emb.usearch.json")).unwrap();
    let msg = refused();
    assert!(msg.contains("not a finished `condenser index`"), "{msg}");
}

/// A build killed after a checkpoint resumes from it and ends with every vector indexed; a
/// checkpoint of other settings is started over, and the summary says so.
#[test]
fn a_killed_index_build_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let model = minilm_layers(dir.path(), 1);
    // 9,842 sentences: ten chunks of 1,024 rows, so a run is killed well before its end
    let snli = data("snli/dev.parquet");
    let emb = dir.path().join("c.parquet");
    let e = emb.to_str().unwrap();
    let m = model.to_str().unwrap();
    let input = snli.to_str().unwrap();
    let a = [
        "encode",
        "--model",
        m,
        "--input",
        input,
        "--columns",
        "sentence1",
        "--out",
        e,
    ];
    ok(condenser(&[&a[..], &["--max-seq-length", "32"]].concat()));
    let partial = dir.path().join("c.usearch.partial.json");
    let index = |efc: &'static str| ["index", "--corpus-embeddings", e, "--ef-construction", efc];
    // checkpoints after every 1,024 rows; killed once the first is written
    let killed = |efc: &'static str| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_condenser"));
        cmd.args(index(efc))
            .env("CONDENSER_INDEX_CHECKPOINT_SECS", "0");
        common::kill_when(cmd, || partial.exists());
    };
    killed("64");
    let msg = ok(condenser(&index("32")));
    assert!(msg.contains("started over"), "{msg}");
    assert!(!partial.exists(), "the checkpoint is removed once built");
    killed("64");
    let msg = ok(condenser(&index("64")));
    assert!(
        msg.contains("indexed 9842 vectors (resumed at row"),
        "{msg}"
    );
    assert!(!partial.exists(), "the checkpoint is removed once built");
}
