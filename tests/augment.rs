//! AugSBERT augmentation: the samplers' rules, BM25 by hand, and `condenser augment` end to end.
mod common;
use condenser::augment::{random_pairs, Bm25};
use condenser::data;
use std::collections::HashSet;
use std::path::Path;
use std::process::Command;

fn stsb_pairs(n: usize) -> (Vec<String>, Vec<String>) {
    let p = condenser::data::Pairs::read(&common::data("stsb/train.parquet"), &Default::default())
        .unwrap();
    (p.sentence1[..n].to_vec(), p.sentence2[..n].to_vec())
}

fn check_rules(s1: &[&str], s2: &[&str], out: &[(&str, &str)], k: usize) {
    let existing: HashSet<(&str, &str)> = s1.iter().copied().zip(s2.iter().copied()).collect();
    let mut seen = HashSet::new();
    let mut per: std::collections::HashMap<&str, usize> = Default::default();
    for &(a, b) in out {
        assert_ne!(a, b, "no pair of a sentence with itself");
        assert!(
            !existing.contains(&(a, b)) && !existing.contains(&(b, a)),
            "no existing pair, in either order"
        );
        assert!(
            seen.insert((a, b)) && !seen.contains(&(b, a)),
            "no duplicates"
        );
        assert!(s2.contains(&b), "partners come from sentence2");
        *per.entry(a).or_default() += 1;
    }
    assert!(per.values().all(|&c| c <= k));
}

#[test]
fn random_sampling_rules_and_determinism() {
    let (a, b) = stsb_pairs(300);
    let (s1, s2): (Vec<&str>, Vec<&str>) = (
        a.iter().map(String::as_str).collect(),
        b.iter().map(String::as_str).collect(),
    );
    let out = random_pairs(&s1, &s2, 3, 42);
    check_rules(&s1, &s2, &out, 3);
    let distinct: HashSet<&str> = s1.iter().copied().collect();
    assert_eq!(
        out.len(),
        3 * distinct.len(),
        "a large pool gives every sentence its k partners"
    );
    assert_eq!(out, random_pairs(&s1, &s2, 3, 42), "same seed, same pairs");
    assert_ne!(out, random_pairs(&s1, &s2, 3, 43));
}

#[test]
fn bm25_sampling_rules() {
    let (a, b) = stsb_pairs(300);
    let (s1, s2): (Vec<&str>, Vec<&str>) = (
        a.iter().map(String::as_str).collect(),
        b.iter().map(String::as_str).collect(),
    );
    let depth = condenser::augment::ranking_depth(&s1, &s2, 3);
    let out = condenser::augment::take_ranked(
        &[Bm25::ranking(&s1, &s2, depth)],
        s1.iter().copied().zip(s2.iter().copied()),
        3,
    );
    check_rules(&s1, &s2, &out, 3);
    // partners share a word with their sentence (BM25 scores only matching terms)
    let words = |s: &str| {
        s.split(|c: char| !c.is_alphanumeric())
            .map(str::to_lowercase)
            .filter(|w| !w.is_empty())
            .collect::<HashSet<_>>()
    };
    assert!(out.iter().all(|(x, y)| !words(x).is_disjoint(&words(y))));
}

#[test]
fn bm25_scores_by_hand() {
    let docs = vec!["the cat sat", "the dog", "a cat and a cat"];
    let idx = Bm25::new(docs);
    // query "cat": df 2 of N 3; idf = ln(1 + (3 - 2 + 0.5) / (2 + 0.5)); avgdl = (3 + 2 + 5) / 3
    let idf = (1.0f64 + 1.5 / 2.5).ln();
    let avg = 10.0 / 3.0;
    let score = |tf: f64, dl: f64| idf * tf * 2.2 / (tf + 1.2 * (1.0 - 0.75 + 0.75 * dl / avg));
    let s = idx.scores("cat");
    assert!((s[0] as f64 - score(1.0, 3.0)).abs() < 1e-5);
    assert_eq!(s[1], 0.0);
    assert!((s[2] as f64 - score(2.0, 5.0)).abs() < 1e-5);
    assert_eq!(
        idx.ranked("Cat!"),
        vec![2, 0],
        "lower-cased terms; best first; non-matching left out"
    );
}

fn augment(ce: &Path, input: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_condenser"))
        .args([
            "augment",
            "--cross-encoder",
            ce.to_str().unwrap(),
            "--input",
            input.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn augment_end_to_end() {
    let d = tempfile::tempdir().unwrap();
    let ce = common::cross_encoder(d.path());
    let input = d.path().join("in.csv");
    std::fs::write(&input, "sentence1,sentence2,label\nA man is playing a guitar.,A man plays the guitar.,0.9\nA woman is slicing an onion.,Someone cuts an onion.,\nThe cat sleeps.,A dog barks loudly.,0.1\n").unwrap();
    let out = d.path().join("aug.parquet");
    let o = augment(&ce, &input, &out, &["--top-k", "1"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let b = data::open(&out, &["sentence1", "sentence2", "label", "origin"])
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    assert_eq!(&b.texts("origin").unwrap()[..3], ["gold", "target", "gold"]);
    let labels = b.labels("label").unwrap();
    assert!(
        (labels[0] - 0.9).abs() < 1e-6 && (labels[2] - 0.1).abs() < 1e-6,
        "gold labels kept"
    );
    assert!(labels.iter().all(|l| (0.0..=1.0).contains(l)));
    assert_eq!(
        b.num_rows(),
        6,
        "3 input rows + 1 sampled partner for each of 3 sentences"
    );
    let first = std::fs::read(&out).unwrap();
    assert!(augment(&ce, &input, &out, &["--top-k", "1"])
        .status
        .success());
    assert_eq!(std::fs::read(&out).unwrap(), first, "same seed, same file");
    // --relabel-gold replaces the gold labels with the cross-encoder's
    assert!(
        augment(&ce, &input, &out, &["--top-k", "1", "--relabel-gold"])
            .status
            .success()
    );
    let b = data::open(&out, &["label"])
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    assert_ne!(b.labels("label").unwrap()[0], labels[0]);
    // a model folder with no head
    let o = augment(&common::model(), &input, &out, &[]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success()
            && e.contains("model.safetensors")
            && e.contains("no classification head"),
        "{e}"
    );
}

#[test]
fn semantic_sampling_rules_and_nearness() {
    use condenser::augment::{ranking_depth, semantic_ranking, take_ranked};
    let (a, b) = stsb_pairs(300);
    let (s1, s2): (Vec<&str>, Vec<&str>) = (
        a.iter().map(String::as_str).collect(),
        b.iter().map(String::as_str).collect(),
    );
    let enc = condenser::model::SentenceEncoder::load(&common::model(), &candle_core::Device::Cpu)
        .unwrap();
    let bar = indicatif::ProgressBar::hidden();
    let existing = || s1.iter().copied().zip(s2.iter().copied());
    let ss = semantic_ranking(&s1, &s2, 3, &enc, 64, &bar).unwrap();
    let semantic = take_ranked(std::slice::from_ref(&ss), existing(), 3);
    check_rules(&s1, &s2, &semantic, 3);
    let distinct: HashSet<&str> = s1.iter().copied().collect();
    assert_eq!(
        semantic.len(),
        3 * distinct.len(),
        "every sentence gets its k partners"
    );
    // the partners are the nearest ones: closer on average than random partners
    let cos = |pairs: &[(&str, &str)]| {
        let (x, y): (Vec<&str>, Vec<&str>) = pairs.iter().copied().unzip();
        let (ex, ey) = (
            enc.encode(&x, 64, &bar).unwrap(),
            enc.encode(&y, 64, &bar).unwrap(),
        );
        (0..ex.len())
            .map(|i| {
                ex.row(i)
                    .iter()
                    .zip(ey.row(i))
                    .map(|(p, q)| p * q)
                    .sum::<f32>()
            })
            .sum::<f32>()
            / ex.len() as f32
    };
    let random = random_pairs(&s1, &s2, 3, 42);
    let (c_sem, c_rand) = (cos(&semantic), cos(&random));
    assert!(
        c_sem > c_rand + 0.2,
        "semantic partners {c_sem} vs random {c_rand}"
    );
    // BM25 + SS: both samplers' partners through one filter, up to 2k a sentence
    let depth = ranking_depth(&s1, &s2, 3);
    let both = take_ranked(&[Bm25::ranking(&s1, &s2, depth), ss], existing(), 3);
    check_rules(&s1, &s2, &both, 6);
    assert!(both.len() > semantic.len() + distinct.len());
}
