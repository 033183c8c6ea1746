//! Metric definitions checked against values computed by hand on tiny examples.
use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow_schema::{Field, Schema};
use condenser::data::retrieval::RetrievalSet;
use condenser::data::write_parquet;
use condenser::eval::metrics::*;
use condenser::eval::ranking_metrics;
use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

fn get(m: &[(String, f64)], k: &str) -> f64 {
    m.iter()
        .find(|(n, _)| n == k)
        .unwrap_or_else(|| panic!("no {k}"))
        .1
}

/// Two queries over docs d1..d5.
/// q1: relevant {d2, d4}, ranked d1 d2 d3 d4 d5 (hits at ranks 2 and 4)
/// q2: relevant {d5},     ranked d5 d1 d2 d3 d4 (hit at rank 1)
#[test]
fn ranking_metrics_by_hand() {
    let r1 = vec!["d1", "d2", "d3", "d4", "d5"];
    let r2 = vec!["d5", "d1", "d2", "d3", "d4"];
    let rel1: HashSet<String> = ["d2", "d4"].iter().map(|s| s.to_string()).collect();
    let rel2: HashSet<String> = ["d5"].iter().map(|s| s.to_string()).collect();
    let m = ranking_metrics(&[r1, r2], &[&rel1, &rel2], "cosine");
    let want = [
        ("cosine_accuracy@1", (0.0 + 1.0) / 2.0),
        ("cosine_accuracy@3", 1.0),
        ("cosine_accuracy@5", 1.0),
        ("cosine_accuracy@10", 1.0),
        ("cosine_precision@1", (0.0 + 1.0) / 2.0),
        ("cosine_precision@3", (1.0 / 3.0 + 1.0 / 3.0) / 2.0),
        ("cosine_precision@5", (2.0 / 5.0 + 1.0 / 5.0) / 2.0),
        ("cosine_precision@10", (2.0 / 10.0 + 1.0 / 10.0) / 2.0),
        ("cosine_precision@100", (2.0 / 100.0 + 1.0 / 100.0) / 2.0),
        ("cosine_recall@1", (0.0 + 1.0) / 2.0),
        ("cosine_recall@3", (0.5 + 1.0) / 2.0),
        ("cosine_recall@5", 1.0),
        ("cosine_recall@10", 1.0),
        ("cosine_recall@100", 1.0),
        ("cosine_mrr@10", (1.0 / 2.0 + 1.0) / 2.0),
        (
            "cosine_ndcg@10",
            ((1.0 / 3f64.log2() + 1.0 / 5f64.log2()) / (1.0 + 1.0 / 3f64.log2()) + 1.0) / 2.0,
        ),
        (
            "cosine_map@100",
            ((1.0 / 2.0 + 2.0 / 4.0) / 2.0 + 1.0) / 2.0,
        ),
    ];
    assert_eq!(m.len(), want.len());
    for (k, v) in want {
        assert!(close(get(&m, k), v), "{k}: {} vs {v}", get(&m, k));
    }
}

#[test]
fn spearman_uses_average_ranks_for_ties() {
    assert_eq!(average_ranks(&[1.0, 2.0, 2.0, 3.0]), [1.0, 2.5, 2.5, 4.0]);
    // ranks x: 1, 2.5, 2.5, 4; ranks y: 1, 3, 2, 4 -> sxy 4.5, sxx 4.5, syy 5
    assert!(close(
        spearman(&[1.0, 2.0, 2.0, 3.0], &[1.0, 3.0, 2.0, 4.0]),
        4.5 / (4.5f64 * 5.0).sqrt()
    ));
    assert!(close(pearson(&[1.0, 2.0, 3.0], &[2.0, 4.0, 6.0]), 1.0));
}

#[test]
fn average_precision_by_hand() {
    // hits at ranks 1 and 3: 1/2 * 1 + 1/2 * 2/3
    assert!(close(
        average_precision(&[0.9, 0.8, 0.7, 0.6], &[true, false, true, false]),
        0.5 + 1.0 / 3.0
    ));
    // a tie at the top counts as one threshold: (R 1/2, P 1/2), then (R 1, P 2/3)
    assert!(close(
        average_precision(&[0.9, 0.9, 0.5], &[true, false, true]),
        0.25 + 1.0 / 3.0
    ));
}

#[test]
fn thresholds_by_hand() {
    let (acc, t) = best_accuracy(&[0.9, 0.8, 0.3, 0.1], &[true, true, false, false], true);
    assert!(close(acc, 1.0) && close(t, 0.55));
    // F1 at 0.9: 2/3; at 0.8: 1/2; at 0.7 (everything): P 2/3, R 1 -> 0.8
    let (f1, p, r, t) = best_f1(&[0.9, 0.8, 0.7], &[true, false, true], true);
    assert!(close(f1, 0.8) && close(p, 2.0 / 3.0) && close(r, 1.0) && close(t, 0.7));
    // distances: lower is better
    let (acc, _) = best_accuracy(&[0.1, 0.2, 0.9], &[true, true, false], false);
    assert!(close(acc, 1.0));
    assert!(close(
        matthews(&[true, true, false, false], &[true, false, true, false]),
        0.0
    ));
    assert!(close(matthews(&[true, false], &[true, false]), 1.0));
}

fn write(dir: &Path, name: &str, cols: Vec<(&str, ArrayRef)>) {
    let fields: Vec<Field> = cols
        .iter()
        .map(|(n, a)| Field::new(*n, a.data_type().clone(), false))
        .collect();
    let rb = RecordBatch::try_new(
        Arc::new(Schema::new(fields)),
        cols.into_iter().map(|(_, a)| a).collect(),
    )
    .unwrap();
    write_parquet(&dir.join(name), rb.schema(), [&rb]).unwrap();
}

fn strings(v: &[&str]) -> ArrayRef {
    Arc::new(StringArray::from(v.to_vec()))
}

fn retrieval_folder(dir: &Path, qrel_docs: &[&str]) {
    write(
        dir,
        "queries.parquet",
        vec![
            ("id", strings(&["q1", "q2", "q3"])),
            ("text", strings(&["wing lift", "shock waves", "nothing"])),
        ],
    );
    write(
        dir,
        "corpus.parquet",
        vec![
            ("id", strings(&["d1", "d2"])),
            ("title", strings(&["Wings", ""])),
            ("text", strings(&["lift of wings", "shock"])),
        ],
    );
    let n = qrel_docs.len();
    let qids = ["q1", "q2", "q3"][..n].to_vec();
    let scores: Vec<i64> = (0..n as i64).map(|i| if i == 2 { 0 } else { 1 }).collect();
    write(
        dir,
        "qrels.parquet",
        vec![
            ("query_id", strings(&qids)),
            ("doc_id", strings(qrel_docs)),
            ("score", Arc::new(Int64Array::from(scores))),
        ],
    );
}

#[test]
fn retrieval_folder_loads_and_drops_queries_without_relevant_docs() {
    let d = tempfile::tempdir().unwrap();
    retrieval_folder(d.path(), &["d1", "d2", "d1"]);
    let set = RetrievalSet::load(d.path()).unwrap();
    assert_eq!(set.queries.len(), 2, "q3 has only a score-0 judgement");
    assert_eq!(set.dropped_queries, 1);
    assert_eq!(set.corpus[0].1, "Wings lift of wings");
    assert_eq!(set.corpus[1].1, "shock");
}

#[test]
fn qrels_naming_an_unknown_document_is_an_error() {
    let d = tempfile::tempdir().unwrap();
    retrieval_folder(d.path(), &["d1", "d9"]);
    let e = RetrievalSet::load(d.path()).unwrap_err().to_string();
    assert!(
        e.contains("qrels.parquet: row 2, column 'doc_id': unknown document 'd9'"),
        "{e}"
    );
    std::fs::remove_file(d.path().join("corpus.parquet")).unwrap();
    let e = RetrievalSet::load(d.path()).unwrap_err().to_string();
    assert!(
        e.contains("corpus.parquet") && e.contains("no such file"),
        "{e}"
    );
}
