//! study/choice.rs's tests: per-query rows, the method chosen on dev folds and its report.
use super::*;
use crate::study::dev_evidence::QueryEvidence;

type Rows = Vec<(String, String, String, f64)>;

/// Per-query rows and, from them, evaluate's mean rows (metric "ndcg").
fn rows(q: &[(&str, &str, &[f64])]) -> (Rows, Rows) {
    let mut per = Vec::new();
    let mut means = Vec::new();
    for (model, set, values) in q {
        // fold k's dev queries are q(4k)..q(4k+3); `dev` holds them all, from q0
        let first = fold_of(set)
            .1
            .map_or(0, |k| 4 * k.parse::<usize>().unwrap());
        for (i, v) in values.iter().enumerate() {
            let query = format!("q{}", first + i);
            per.push((model.to_string(), set.to_string(), query, *v));
        }
        let mean = values.iter().sum::<f64>() / values.len() as f64;
        means.push((model.to_string(), set.to_string(), "ndcg".into(), mean));
    }
    (means, per)
}

/// Fold models count on their own fold's dev queries alone, query-free models on every set
/// they were scored on; each query's gain pairs it with the stock model's score on that query;
/// a gain counts beyond twice its standard error over queries (pb: one query's big gain, the
/// rest losses) and twice its sd over seeds (p: one seed gains, the other does not); the best
/// counting gain is chosen, the stock model kept when none counts, and a query without the
/// stock model's score is an error naming it.
#[test]
fn dev_picks_a_paired_gain_beyond_query_and_seed_noise_and_folds_never_leak() {
    let stock_f0: &[f64] = &[0.30, 0.40, 0.50, 0.60];
    let stock_f1: &[f64] = &[0.20, 0.30, 0.40, 0.50];
    let stock_all: &[f64] = &[0.30, 0.40, 0.50, 0.60, 0.20, 0.30, 0.40, 0.50];
    let (means, per) = rows(&[
        ("model/stock", "dev", stock_all),
        ("model/stock", "dev-f0", stock_f0),
        ("model/stock", "dev-f1", stock_f1),
        ("o/b-f0-s1", "dev-f0", &[0.33, 0.42, 0.53, 0.62]),
        ("o/b-f0-s1", "dev-f1", &[0.99, 0.99, 0.99, 0.99]), // saw dev-f1's queries
        ("o/b-f1-s1", "dev-f1", &[0.22, 0.33, 0.42, 0.53]),
        (
            "o/p-s1",
            "dev",
            &[0.40, 0.50, 0.60, 0.70, 0.30, 0.40, 0.50, 0.60],
        ),
        ("o/p-s2", "dev", stock_all),
        ("o/pb-f0-s1", "dev-f0", &[0.90, 0.38, 0.48, 0.58]),
        ("o/pb-f1-s1", "dev-f1", &[0.18, 0.28, 0.38, 0.48]),
    ]);
    let c = Choice::new(&means, &per, "ndcg", "model/stock", &|_| None).unwrap();
    let row = |m: &str| c.candidates.iter().find(|x| x.method == m).unwrap().clone();
    let b = row("b");
    assert_eq!((b.seeds.len(), b.queries), (1, 8));
    assert!((b.gain - 0.025).abs() < 1e-9, "{b:?}");
    assert!(b.seed_sd.is_none() && b.gain > 2.0 * b.gain_se.unwrap() && b.counts);
    let p = row("p");
    assert!(
        (p.gain - 0.05).abs() < 1e-9 && p.gain_se.unwrap() < 1e-9,
        "{p:?}"
    );
    assert!((p.seed_sd.unwrap() - 0.1f64.hypot(0.0) / 2f64.sqrt()).abs() < 1e-9 && !p.counts);
    let pb = row("pb");
    assert!(pb.gain > b.gain && !pb.counts, "{pb:?}");
    // what each gain rests on (issue 82): b gains on every query and both folds; pb's mean is
    // one query's, its second fold behind
    let (eb, epb) = (&b.evidence, &pb.evidence);
    assert_eq!((eb.won, eb.lost, epb.won, epb.lost), (8, 0, 1, 7));
    assert!((eb.median.unwrap() - 0.025).abs() < 1e-9, "{eb:?}");
    let folds = |e: &QueryEvidence| {
        e.folds
            .iter()
            .map(|f| (f.0.clone(), (f.1 * 1e4).round()))
            .collect::<Vec<_>>()
    };
    assert_eq!(folds(eb), [("0".into(), 250.0), ("1".into(), 250.0)]);
    assert_eq!(folds(epb), [("0".into(), 1350.0), ("1".into(), -200.0)]);
    assert!(eb.every_fold_ahead() && !epb.every_fold_ahead());
    assert!(eb.bootstrap_low.unwrap() > 0.0 && epb.bootstrap_low.unwrap() < 0.0);
    // p, scored on `dev` alone, is in no fold: nothing held across folds
    assert!(row("p").evidence.folds.is_empty() && !row("p").evidence.every_fold_ahead());
    assert_eq!(c.chosen, "b", "{}", c.why);
    let md = c.markdown();
    assert!(md.contains("| b (chosen) | 1 |"), "{md}");
    assert!(
        md.contains("| yes | 8 / 0 | +0.0250 | +0.0250, +0.0250 |"),
        "{md}"
    );

    let worse: Rows = (per.iter().cloned())
        .map(|mut x| {
            if x.0.starts_with("o/b-") {
                x.3 -= 0.05;
            }
            x
        })
        .collect();
    let c = Choice::new(&means, &worse, "ndcg", "model/stock", &|_| None).unwrap();
    assert_eq!(c.chosen, "stock", "{}", c.why);
    assert!(Choice::new(&means, &per, "ndcg", "model/other", &|_| None).is_err());
    let unpaired: Rows = (per.into_iter())
        .filter(|x| !(x.0 == "model/stock" && x.1 == "dev-f1" && x.2 == "q6"))
        .collect();
    let e = Choice::new(&means, &unpaired, "ndcg", "model/stock", &|_| None).unwrap_err();
    assert!(e.to_string().contains("dev set dev-f1, query q6"), "{e}");
}

/// A model that saw no query, scored on `dev` and on a fold `dev-f0` holding some of the
/// same queries, counts each query once: its standard error is over the 8 queries, not 12.
#[test]
fn a_query_scored_on_dev_and_on_its_fold_counts_once() {
    let stock: &[f64] = &[0.30, 0.40, 0.50, 0.60, 0.20, 0.30, 0.40, 0.50];
    let p: &[f64] = &[0.36, 0.44, 0.55, 0.61, 0.28, 0.33, 0.41, 0.59];
    let (means, per) = rows(&[
        ("model/stock", "dev", stock),
        ("model/stock", "dev-f0", &stock[..4]),
        ("o/p-s1", "dev", p),
        ("o/p-s1", "dev-f0", &p[..4]),
    ]);
    let c = Choice::new(&means, &per, "ndcg", "model/stock", &|_| None).unwrap();
    let row = &c.candidates[0];
    assert_eq!(row.queries, 8, "{row:?}");
    let d: Vec<f64> = p.iter().zip(stock).map(|(a, b)| a - b).collect();
    let (gain, sd) = mean_sd(&d);
    assert!((row.gain - gain).abs() < 1e-12, "{row:?}");
    assert!(
        (row.gain_se.unwrap() - sd.unwrap() / 8f64.sqrt()).abs() < 1e-12,
        "{row:?}"
    );
}
