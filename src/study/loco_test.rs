//! loco.rs's tests: test gains paired by query, rules set on the others and scored on the one
//! left out, shipped rules applied.
use super::*;
use crate::study::choice::{Choice, DevRow};
use crate::study::loco_shipped::Shipped;

fn dev_row(method: &str, gain: f64, se: f64, queries: usize) -> DevRow {
    DevRow {
        method: method.into(),
        seeds: vec![("1".into(), 0.5 + gain, gain)],
        mean: 0.5 + gain,
        sd: None,
        gain,
        queries,
        gain_se: Some(se),
        seed_sd: None,
        counts: gain > 2.0 * se,
        wall_seconds: None,
        evidence: Default::default(),
    }
}

/// A collection whose dev gains are `dev` and test gains `test` (method, gain).
fn collection(name: &str, queries: usize, dev: &[(&str, f64)], test: &[(&str, f64)]) -> Collection {
    let base = DevRow {
        method: "stock".into(),
        ..dev_row("stock", 0.0, 0.0, 0)
    };
    Collection {
        name: name.into(),
        dev: Choice {
            metric: "ndcg".into(),
            baseline: base,
            candidates: dev
                .iter()
                .map(|(m, g)| dev_row(m, *g, 0.01, queries))
                .collect(),
            chosen: "stock".into(),
            why: String::new(),
        },
        test: (test.iter())
            .map(|(m, g)| TestGain {
                method: m.to_string(),
                seeds: 3,
                score: 0.5 + g,
                gain: *g,
                se: 0.01,
                sd: Some(0.002),
                wins: 0,
                losses: 0,
                queries: 40,
            })
            .collect(),
        stock_score: 0.5,
    }
}

/// Per-query test rows: each query's gain pairs it with the stock model's score on that
/// query, seeds averaged; the seeds' sd is over each seed's mean.
#[test]
fn test_gains_are_paired_by_query_and_averaged_over_seeds() {
    let row = |m: &str, q: &str, v: f64| (m.to_string(), "t".to_string(), q.to_string(), v);
    let rows = vec![
        row("model/stock", "q1", 0.5),
        row("model/stock", "q2", 0.3),
        row("o/b-s1", "q1", 0.6),
        row("o/b-s1", "q2", 0.3),
        row("o/b-s2", "q1", 0.4),
        row("o/b-s2", "q2", 0.5),
    ];
    let (stock, t) = test_gains(&rows, "stock").unwrap();
    assert!((stock - 0.4).abs() < 1e-12);
    let b = &t[0];
    assert_eq!((b.method.as_str(), b.seeds, b.queries), ("b", 2, 2));
    // q1: mean 0.5 - 0.5 = 0; q2: mean 0.4 - 0.3 = 0.1
    assert!((b.gain - 0.05).abs() < 1e-12, "{b:?}");
    assert_eq!((b.wins, b.losses), (1, 0));
    // seed gains 0.05 and 0.05: no spread
    assert!(b.sd.unwrap().abs() < 1e-12, "{b:?}");
    let missing: Vec<_> = rows
        .into_iter()
        .filter(|r| !(r.0 == "o/b-s2" && r.2 == "q2"))
        .collect();
    assert!(test_gains(&missing, "stock")
        .unwrap_err()
        .to_string()
        .contains("query q2"));
}

/// Rules: a dev rule takes the best dev gain beyond k se (label gains corrected), falls back
/// below MIN_DEV_QUERIES; selection takes the least worst-case risk (harm one se below the
/// test gain), then harm, then the mean gain;
/// each collection left out is scored by the rule set on the others.
#[test]
fn rules_are_set_on_the_others_and_scored_on_the_one_left_out() {
    let labels = vec!["b".to_string()];
    let allowed = vec!["stock".to_string(), "pw".to_string(), "b".to_string()];
    // dev says b (+0.03 beyond 2 se) on A and B, where b gains on test; on C dev says b but
    // b harms on test; D has 12 dev queries: a dev rule falls back there
    let a = collection(
        "A",
        40,
        &[("pw", 0.001), ("b", 0.03)],
        &[("pw", 0.004), ("b", 0.05)],
    );
    let b = collection(
        "B",
        40,
        &[("pw", 0.002), ("b", 0.03)],
        &[("pw", 0.003), ("b", 0.04)],
    );
    let c = collection(
        "C",
        40,
        &[("pw", 0.0), ("b", 0.03)],
        &[("pw", 0.002), ("b", -0.04)],
    );
    let d = collection(
        "D",
        12,
        &[("pw", 0.0), ("b", 0.05)],
        &[("pw", 0.001), ("b", 0.02)],
    );
    let dev = |k, correction, fallback: &str| Rule::Dev {
        k,
        correction,
        fallback: fallback.into(),
        evidence: Evidence::Mean,
        among: Among::All,
    };
    assert_eq!(dev(2.0, 1.0, "stock").pick(&a.dev, &allowed, &labels), "b");
    assert_eq!(dev(2.0, 1.0, "pw").pick(&d.dev, &allowed, &labels), "pw");
    // 0.015 is below 2 se (0.02) unless corrected x2
    let weak = collection("W", 40, &[("b", 0.015)], &[("b", 0.01)]);
    assert_eq!(
        dev(2.0, 1.0, "stock").pick(&weak.dev, &allowed, &labels),
        "stock"
    );
    assert_eq!(
        dev(2.0, 2.0, "stock").pick(&weak.dev, &allowed, &labels),
        "b"
    );

    let s = Setting::with_labels("stock", &["pw".to_string(), "b".to_string()]);
    let cs = [a, b, c, d];
    let loco = Loco::rotate(&cs, &[s], &labels).unwrap();
    let r = &loco.settings[0].rotations;
    // set on B, C, D: b harms C; pw harms nowhere there, but every pw gain lies within one se
    // (0.01) of zero, so its risk (0.009 on D) loses to the stock model's none
    assert_eq!(
        (r[0].left_out.as_str(), r[0].outcome.pick.method.as_str()),
        ("A", "stock")
    );
    assert!((r[0].outcome.regret - 0.05).abs() < 1e-9, "{:?}", r[0]);
    // no harm, but b gained beyond twice its sd there and stock fell more than b's sd short
    assert!(r[0].outcome.harm == 0.0 && !r[0].outcome.within_target);
    let always = |m: &str| Rule::Always { method: m.into() };
    let point_safe = [always("pw"), always("stock")];
    let bcd: Vec<&Collection> = cs[1..].iter().collect();
    let (picked, outcomes) = select(&point_safe, &bcd, &allowed, &labels).unwrap();
    assert_eq!(*picked, always("stock"));
    // always pw's outcomes on B, C and D: no harm on any, a risk of 0.009 on D
    let pw = select(&point_safe[..1], &bcd, &allowed, &labels).unwrap().1;
    assert!(pw.iter().all(|o| o.harm == 0.0), "{pw:?}");
    assert!((pw[2].risk - 0.009).abs() < 1e-9, "{pw:?}");
    assert!(outcomes.iter().all(|o| o.risk == 0.0));
    // set on A, B, D (no harm anywhere from b): always b has the best mean; on C it harms
    assert_eq!(r[2].rule, Rule::Always { method: "b".into() });
    assert!((r[2].outcome.harm - 0.04).abs() < 1e-9);
    assert!(!r[2].outcome.within_target && !r[2].outcome.ahead);
    // D: set on A, B, C; its pick within target wherever it is b itself or stock-safe
    assert_eq!(r[3].outcome.within_target, r[3].outcome.pick.method == "b");
    assert_eq!(loco.settings[0].shipped, always("stock"));
    let md = loco.markdown();
    assert!(md.contains("| C | always b | b | -0.0400"), "{md}");
    assert!(md.contains("| b | A +0.0300 / +0.0500;"), "{md}");
    assert!(Loco::rotate(&cs[..2], &[], &labels).is_err());
}

/// Issue 82: the candidate set is the rotation's to choose, and a gain may be asked to hold on
/// every fold or past a bootstrap's bound. p (label-free) leads on dev where it then harms; b
/// (labels) is safe where dev sees it gain: only a rule among the label methods harms nowhere,
/// and it is shipped. Rules that tie pick the one that can pick fewer methods, then the stock.
#[test]
fn the_candidate_set_and_the_evidence_are_part_of_the_rule() {
    let labels = vec!["b".to_string()];
    let allowed: Vec<String> = ["stock", "p", "b"].iter().map(|m| m.to_string()).collect();
    let a = collection(
        "A",
        40,
        &[("p", 0.05), ("b", 0.03)],
        &[("p", -0.03), ("b", 0.04)],
    );
    let b = collection(
        "B",
        40,
        &[("p", 0.05), ("b", 0.03)],
        &[("p", 0.02), ("b", 0.04)],
    );
    let c = collection(
        "C",
        40,
        &[("p", 0.0), ("b", 0.03)],
        &[("p", 0.0), ("b", 0.04)],
    );
    let d = collection(
        "D",
        40,
        &[("p", 0.0), ("b", 0.0)],
        &[("p", 0.0), ("b", -0.02)],
    );
    let rule = |evidence, among| Rule::Dev {
        k: 2.0,
        correction: 1.0,
        fallback: "stock".into(),
        evidence,
        among,
    };
    assert_eq!(
        rule(Evidence::Mean, Among::All).pick(&a.dev, &allowed, &labels),
        "p"
    );
    let labels_only = rule(Evidence::Mean, Among::Labels);
    assert_eq!(labels_only.pick(&a.dev, &allowed, &labels), "b");
    assert_eq!(labels_only.can_pick(&allowed, &labels), ["b", "stock"]);
    assert!(labels_only.name().contains("among the label methods"));
    // b's gain on A: both folds ahead, or one behind; a bootstrap bound above or below zero
    let mut split = a.dev.clone();
    let row = split
        .candidates
        .iter_mut()
        .find(|r| r.method == "b")
        .unwrap();
    row.evidence.folds = vec![("0".into(), 0.07), ("1".into(), -0.01)];
    row.evidence.bootstrap_low = Some(-0.002);
    let folds = rule(Evidence::Folds, Among::Labels);
    let boot = rule(Evidence::Bootstrap, Among::Labels);
    assert_eq!(folds.pick(&split, &allowed, &labels), "stock");
    assert_eq!(boot.pick(&split, &allowed, &labels), "stock");
    let row = split
        .candidates
        .iter_mut()
        .find(|r| r.method == "b")
        .unwrap();
    row.evidence.folds[1].1 = 0.01;
    row.evidence.bootstrap_low = Some(0.004);
    assert_eq!(folds.pick(&split, &allowed, &labels), "b");
    assert_eq!(boot.pick(&split, &allowed, &labels), "b");

    let s = Setting::with_labels("stock", &["p".to_string(), "b".to_string()]);
    let cs = [a, b, c, d];
    let loco = Loco::rotate(&cs, &[s], &labels).unwrap();
    let shipped = &loco.settings[0].shipped;
    assert_eq!(
        *shipped,
        rule(Evidence::Mean, Among::Labels),
        "{}",
        shipped.name()
    );
    assert!(loco.settings[0]
        .shipped_outcomes
        .iter()
        .all(|o| o.harm == 0.0));
    // a rule file from before these fields reads as the mean among every method
    let old: Rule = serde_json::from_str(
        r#"{"rule": "dev", "k": 2.0, "correction": 1.5, "fallback": "stock"}"#,
    )
    .unwrap();
    assert!(matches!(
        old,
        Rule::Dev {
            evidence: Evidence::Mean,
            among: Among::All,
            ..
        }
    ));
    // a misspelt field would be the mean rule in silence: refused, naming it
    let e = serde_json::from_str::<Rule>(
        r#"{"rule": "dev", "k": 2.0, "correction": 1.5, "fallback": "stock", "evidance": "folds"}"#,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("unknown field `evidance`"), "{e}");
    // ties: always stock over a dev rule that never fires (its evidence absent), which can
    // pick more
    let never = [
        rule(Evidence::Folds, Among::All),
        Rule::Always {
            method: "stock".into(),
        },
    ];
    let others: Vec<&Collection> = cs.iter().collect();
    let (r, _) = select(&never, &others, &allowed, &labels).unwrap();
    assert_eq!(
        *r,
        Rule::Always {
            method: "stock".into()
        }
    );
}

/// Two splits of one collection (issue 82's second rotation) leave together: a rule scored on
/// one split is never set on the other, which shares its documents and queries. Three
/// collections are still needed, and a name given twice is refused.
#[test]
fn a_collections_splits_are_left_out_together() {
    let c = |name: &str, p: f64| collection(name, 40, &[("p", 0.0)], &[("p", p)]);
    let cs = [
        c("A/s0", -0.03),
        c("A/s1", -0.03),
        c("B", 0.02),
        c("C", 0.02),
    ];
    assert_eq!(cs[1].group(), "A");
    let s = Setting::zero_labels("stock", &["p".to_string()]);
    let loco = Loco::rotate(&cs, std::slice::from_ref(&s), &[]).unwrap();
    let r = &loco.settings[0].rotations;
    let p = Rule::Always { method: "p".into() };
    let stock = Rule::Always {
        method: "stock".into(),
    };
    // A's splits: set on B and C alone, where p gains (with A/s1 among them, p would harm)
    assert_eq!((r[0].left_out.as_str(), &r[0].rule), ("A/s0", &p));
    assert_eq!((r[1].left_out.as_str(), &r[1].rule), ("A/s1", &p));
    assert!((r[0].outcome.harm - 0.03).abs() < 1e-9);
    // B and C: set on both of A's splits and the other, where p harms
    assert_eq!((&r[2].rule, &r[3].rule), (&stock, &stock));
    assert_eq!(loco.settings[0].shipped, stock);
    let two = [c("A/s0", 0.0), c("A/s1", 0.0), c("B", 0.0)];
    let e = Loco::rotate(&two, std::slice::from_ref(&s), &[]).unwrap_err();
    assert!(e.to_string().contains("at least 3 collections"), "{e}");
    let twice = [c("A", 0.0), c("A", 0.0), c("B", 0.0), c("C", 0.0)];
    let e = Loco::rotate(&twice, &[s], &[]).unwrap_err();
    assert!(e.to_string().contains("collection A is named twice"), "{e}");
}

/// A shipped rule file: the rule with labels chooses (the default below 20 dev queries,
/// said so), the zero-label rule names the label-free pick, agreement counts signs.
#[test]
fn shipped_rules_choose_and_say_when_dev_cannot_decide() {
    let json = r#"{"metric": "ndcg", "collections": ["A", "B", "C"], "labels": ["b"],
        "settings": [
          {"setting": "zero labels", "shipped": {"rule": "always", "method": "pw"}},
          {"setting": "with labels", "shipped": {"rule": "dev", "k": 2.0, "correction": 1.5, "fallback": "bw"}}],
        "agreement": [["b", [["A", 0.01, 0.02], ["B", 0.01, -0.03], ["C", -0.01, -0.02]]]]}"#;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("loco.json");
    std::fs::write(&path, json).unwrap();
    let shipped = Shipped::read(&path).unwrap();
    assert_eq!(shipped.agreement("b"), Some((2, 3)));
    assert_eq!(shipped.agreement("pb"), None);
    // 40 dev queries: b's +0.015 is short of 2 se (0.02) but x1.5 passes it
    let mut dev = collection("X", 40, &[("pw", 0.001), ("b", 0.015)], &[]).dev;
    assert_eq!(shipped.apply(&mut dev).unwrap(), "pw");
    assert_eq!(dev.chosen, "b", "{}", dev.why);
    assert!(dev.why.contains("A, B, C"), "{}", dev.why);
    let mut few = collection("Y", 14, &[("pw", 0.001), ("b", 0.05), ("bw", 0.0)], &[]).dev;
    shipped.apply(&mut few).unwrap();
    assert_eq!(few.chosen, "bw");
    assert!(
        few.why
            .contains("dev cannot decide here: 14 judged train queries"),
        "{}",
        few.why
    );
    // the default bw is not among this run's candidates; nor is the rules' metric its
    let e = shipped.apply(&mut collection("Z", 14, &[("pw", 0.0)], &[]).dev);
    assert!(e
        .unwrap_err()
        .to_string()
        .contains("picks bw, which this run"));
    let mut other = collection("W", 40, &[("pw", 0.0)], &[]).dev;
    other.metric = "mrr".into();
    let e = shipped.apply(&mut other).unwrap_err().to_string();
    assert!(e.contains("set on ndcg, this choice is by mrr"), "{e}");
    std::fs::write(&path, json.replace("with labels", "with label")).unwrap();
    let e = Shipped::read(&path).unwrap_err().to_string();
    assert!(e.contains("no shipped rule for 'with labels'"), "{e}");
    // rules naming `stock` apply to a run from another model: its own name comes back
    let stocky = json.replace(r#""method": "pw""#, r#""method": "stock""#);
    std::fs::write(
        &path,
        stocky.replace(r#""fallback": "bw""#, r#""fallback": "stock""#),
    )
    .unwrap();
    let shipped = Shipped::read(&path).unwrap();
    let mut bert = collection("V", 14, &[("b", 0.05)], &[]).dev;
    bert.baseline.method = "bert-base-uncased".into();
    assert_eq!(shipped.apply(&mut bert).unwrap(), "bert-base-uncased");
    assert_eq!(bert.chosen, "bert-base-uncased");
    let why = &bert.why;
    assert!(
        why.contains("taken: the stock model (bert-base-uncased)"),
        "{why}"
    );
}
