//! `augment --corpus`: pseudo-query pairs from a corpus alone (augment/pseudo.rs), on Cranfield's
//! real corpus and on small BEIR-layout corpora built here for the edge cases.
mod common;

use std::collections::HashSet;
use std::path::Path;

/// (anchor, positive, doc_id, kind) rows of a written pairs file.
fn rows(path: &Path) -> Vec<[String; 4]> {
    let mut out = Vec::new();
    for b in condenser::data::open(path, &["anchor", "positive", "doc_id", "kind"]).unwrap() {
        let b = b.unwrap();
        let cols: Vec<Vec<&str>> = ["anchor", "positive", "doc_id", "kind"]
            .iter()
            .map(|c| b.texts(c).unwrap())
            .collect();
        out.extend((0..b.num_rows()).map(|i| std::array::from_fn(|c| cols[c][i].to_string())));
    }
    out
}

fn augment(args: &[&str]) -> std::process::Output {
    let mut all = vec!["augment"];
    all.extend_from_slice(args);
    common::condenser(&all)
}

#[test]
fn cranfield_pairs_are_deterministic_for_a_seed_and_never_empty() {
    let d = tempfile::tempdir().unwrap();
    let cranfield = common::data("cranfield");
    let run = |name: &str, seed: &str| {
        let out = d.path().join(name);
        let o = augment(&[
            "--corpus",
            cranfield.to_str().unwrap(),
            "--seed",
            seed,
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        rows(&out)
    };
    let (a, b, c) = (
        run("a.parquet", "7"),
        run("b.parquet", "7"),
        run("c.parquet", "8"),
    );
    assert_eq!(a, b, "same seed, same file");
    let crops = |r: &[[String; 4]]| -> Vec<[String; 4]> {
        r.iter().filter(|x| x[3] == "crop").cloned().collect()
    };
    assert_ne!(crops(&a), crops(&c), "another seed crops elsewhere");
    // Cranfield: 1,400 documents, two of them with an empty or repeated text; every other has a
    // title, and every text long enough to crop
    let titles = a.iter().filter(|x| x[3] == "title-body").count();
    assert_eq!(titles, 1398);
    assert_eq!(crops(&a).len(), 1398);
    let mut seen = HashSet::new();
    for r in &a {
        assert!(!r[0].trim().is_empty() && !r[1].trim().is_empty(), "{r:?}");
        assert_ne!(r[0], r[1], "a pair is never its own positive");
        assert!(
            seen.insert((r[0].clone(), r[1].clone())),
            "pair twice: {r:?}"
        );
        if r[3] == "title-body" {
            // Cranfield's texts begin with their titles: the body is the rest
            assert!(!r[1].starts_with(&r[0]), "{r:?}");
        }
    }
    // a crop is a run of the document's words
    let corpus =
        condenser::data::retrieval::read_documents(&cranfield.join("corpus.parquet")).unwrap();
    let by_id: std::collections::HashMap<&str, &str> = corpus
        .iter()
        .map(|d| (d.id.as_str(), d.text.as_str()))
        .collect();
    for r in crops(&a) {
        let words = by_id[r[2].as_str()]
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        assert!(words.contains(&r[0]) && words.contains(&r[1]), "{r:?}");
    }
}

#[test]
fn title_pairs_only_where_a_title_exists_and_documents_deduplicated() {
    let d = tempfile::tempdir().unwrap();
    let corpus = d.path().join("corpus.jsonl");
    let long = "the boundary layer on a flat plate grows with the distance from the leading edge";
    std::fs::write(
        &corpus,
        [
            format!(r#"{{"_id": "1", "title": "flat plates", "text": "{long}"}}"#),
            // no title field value: no title-body pair
            format!(r#"{{"_id": "2", "title": "", "text": "shock waves {long}"}}"#),
            // the same text as document 1: dropped before any pair is drawn
            format!(r#"{{"_id": "3", "title": "again", "text": "{long}"}}"#),
            // too short to crop, titled
            r#"{"_id": "4", "title": "short one", "text": "two words"}"#.to_string(),
        ]
        .join("\n"),
    )
    .unwrap();
    let out = d.path().join("p.parquet");
    let o = augment(&[
        "--corpus",
        corpus.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("1 duplicate or empty texts dropped"),
        "{stdout}"
    );
    let r = rows(&out);
    let kinds: Vec<(&str, &str)> = r.iter().map(|x| (x[2].as_str(), x[3].as_str())).collect();
    assert_eq!(
        kinds,
        [
            ("1", "title-body"),
            ("1", "crop"),
            ("2", "crop"),
            ("4", "title-body")
        ]
    );
    assert_eq!(r[0][0], "flat plates");
    assert_eq!(r[0][1], long);

    // title-body alone on a corpus without any title is a clear error, and writes nothing
    let untitled = d.path().join("untitled.jsonl");
    std::fs::write(&untitled, format!(r#"{{"_id": "1", "text": "{long}"}}"#)).unwrap();
    refused(
        &untitled,
        &["--pseudo", "title-body"],
        &["untitled.jsonl", "title"],
    );
}

/// `augment --corpus corpus extra...` fails, its error holds every `needles`, and no file is written.
fn refused(corpus: &Path, extra: &[&str], needles: &[&str]) {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("p.parquet");
    let mut args = vec![
        "--corpus",
        corpus.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let o = augment(&args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    for n in needles {
        assert!(err.contains(n), "no '{n}' in: {err}");
    }
    assert!(!out.exists());
}

#[test]
fn bad_corpus_names_file_and_column_and_flags_do_not_mix() {
    let d = tempfile::tempdir().unwrap();
    let corpus = d.path().join("corpus.jsonl");
    std::fs::write(&corpus, r#"{"_id": "1", "body": "no text column here"}"#).unwrap();
    refused(&corpus, &[], &["corpus.jsonl", "text"]);
    // a cross-encoder has nothing to do with corpus pairs: refused, not ignored
    refused(&corpus, &["--cross-encoder", "x"], &["--cross-encoder"]);
    // so are labelling flags that have defaults (a value given would be silently unused)
    refused(&corpus, &["--top-k", "5"], &["--top-k"]);
    // crop fractions outside (0, 1]
    refused(&corpus, &["--crop-max", "1.5"], &["--crop-max"]);
}

/// `augment --queries`: Cranfield's real queries without their judgments, each with its top 2
/// documents by BM25 and by BM25 fused with MiniLM. Each positive is checked against the qrels the
/// command never read: fusing in the model finds more relevant positives than BM25 alone (0.41
/// against 0.34 of the top 2 on 2026-11-25).
#[test]
fn unjudged_queries_pair_with_their_top_documents() {
    let d = tempfile::tempdir().unwrap();
    let cranfield = common::data("cranfield");
    let set = condenser::data::retrieval::RetrievalSet::load(&cranfield).unwrap();
    let model = common::model();
    let precision = |positives: &str| {
        let out = d.path().join(format!("{positives}.parquet"));
        let mut args = vec![
            "--corpus",
            cranfield.to_str().unwrap(),
            "--queries",
            cranfield.to_str().unwrap(),
            "--positives",
            positives,
            "--positives-per-query",
            "2",
            "--out",
            out.to_str().unwrap(),
        ];
        if positives != "bm25" {
            args.extend(["--retriever", model.to_str().unwrap()]);
        }
        let o = augment(&args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let rows = rows(&out);
        let query_id: std::collections::HashMap<&str, &str> = set
            .queries
            .iter()
            .map(|(id, t)| (t.as_str(), id.as_str()))
            .collect();
        let judged: Vec<&[String; 4]> = rows
            .iter()
            .filter(|r| query_id.contains_key(r[0].as_str()))
            .collect();
        assert_eq!(judged.len(), 2 * set.queries.len(), "2 a query");
        assert!(rows.iter().all(|r| r[3] == format!("query-{positives}")));
        let hits = judged
            .iter()
            .filter(|r| set.relevant[query_id[r[0].as_str()]].contains(&r[2]))
            .count();
        hits as f64 / judged.len() as f64
    };
    let (bm25, fused) = (precision("bm25"), precision("fused"));
    eprintln!("relevant positives: bm25 {bm25:.3}, fused {fused:.3}");
    assert!(bm25 > 0.3, "bm25 {bm25}");
    assert!(fused > bm25, "fused {fused} vs bm25 {bm25}");
    // a model ranking needs the model; a file has no qrels split; flags of pseudo pairs refused
    let q = ["--queries", cranfield.to_str().unwrap()];
    refused(
        &cranfield,
        &[&q[..], &["--positives", "model"]].concat(),
        &["--retriever"],
    );
    let file = cranfield.join("queries.parquet");
    let split = [
        "--queries",
        file.to_str().unwrap(),
        "--query-split",
        "test",
        "--positives",
        "bm25",
    ];
    refused(&cranfield, &split, &["queries.parquet", "--query-split"]);
    refused(
        &cranfield,
        &[&q[..], &["--crops", "2"]].concat(),
        &["--crops"],
    );
}
