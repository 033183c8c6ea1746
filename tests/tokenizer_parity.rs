//! The ASCII fast path must give exactly the tokenizers crate's ids on every text we have.
mod common;
use condenser::data;
use condenser::tokenize::{FastWordPiece, Tokenizer};
use rayon::prelude::*;
use std::path::PathBuf;

fn all_text_files() -> Vec<(PathBuf, Vec<&'static str>)> {
    let pairs = ["sentence1", "sentence2"];
    let mut v: Vec<(PathBuf, Vec<&str>)> = [
        "stsb/train.parquet",
        "stsb/dev.parquet",
        "stsb/test.parquet",
        "mrpc/train.parquet",
        "mrpc/test.parquet",
        "rte/train.parquet",
        "rte/dev.parquet",
        "medqp/all.parquet",
        "snli/dev.parquet",
        "snli/test.parquet",
    ]
    .iter()
    .map(|f| (common::data(f), pairs.to_vec()))
    .collect();
    v.push((common::data("wikitext2/valid.parquet"), vec!["text"]));
    v.push((common::data("wikitext2/test.parquet"), vec!["text"]));
    v.push((common::data("cranfield/queries.parquet"), vec!["text"]));
    v.push((
        common::data("cranfield/corpus.parquet"),
        vec!["title", "text"],
    ));
    for entry in std::fs::read_dir(common::root().join("datasets/brown")).unwrap() {
        v.push((entry.unwrap().path(), vec!["text"]));
    }
    v
}

#[test]
fn fast_path_equals_tokenizers_crate_on_all_shared_data() {
    let tok = Tokenizer::load(&common::model()).unwrap();
    assert!(
        tok.has_fast_path(),
        "MiniLM's tokenizer is plain BERT WordPiece"
    );
    let fast = FastWordPiece::new(tok.inner()).unwrap();
    let (mut texts_seen, mut fast_taken) = (0usize, 0usize);
    for (path, cols) in all_text_files() {
        for batch in data::open(&path, &cols).unwrap() {
            let batch = batch.unwrap();
            for c in &cols {
                let texts = batch.texts(c).unwrap();
                let taken: usize = texts
                    .par_iter()
                    .map(|t| {
                        let mut want = Vec::new();
                        tok.slow_ids_into(t, &mut want).unwrap();
                        let mut got = Vec::new();
                        let took = fast.encode(t, &mut got);
                        if took {
                            assert_eq!(got, want, "{}: fast path differs on {t:?}", path.display());
                        }
                        // the public entry point agrees whichever path it takes
                        assert_eq!(tok.ids(t).unwrap(), want);
                        took as usize
                    })
                    .sum();
                texts_seen += texts.len();
                fast_taken += taken;
            }
        }
    }
    // every shared split plus all 15 Brown genres: ~91k shared texts and ~57k Brown sentences
    assert!(texts_seen > 140_000, "read {texts_seen} texts");
    eprintln!(
        "fast path took {fast_taken} of {texts_seen} texts; all others fell back to the crate"
    );
    // the fast path must carry the bulk of real text, or the speed claim is hollow
    assert!(
        fast_taken as f64 > 0.95 * texts_seen as f64,
        "fast path took {fast_taken} of {texts_seen}"
    );
}

#[test]
fn fast_path_edge_cases_match_or_decline() {
    let tok = Tokenizer::load(&common::model()).unwrap();
    let fast = FastWordPiece::new(tok.inner()).unwrap();
    let long_word = "a".repeat(150);
    let cases = [
        "",
        "   ",
        "Hello, World!",
        "don't stop-believing...",
        "tab\tsep\nnew\rline",
        "ctrl\x01char\x7fdel",
        "vt\x0bff\x0cmix",
        "UNKNOWNWORDzzqx###",
        &long_word,
        "[MASK] is special",
        "a [mask] b",
        "[CLS]x[SEP]",
        "$100 & 50% off @home #1 ~x~ `q` {b} |p| ^c",
        "naïve café",
        "日本語 text",
        "x\u{fffd}y",
    ];
    for t in cases {
        let mut want = Vec::new();
        tok.slow_ids_into(t, &mut want).unwrap();
        let mut got = Vec::new();
        if fast.encode(t, &mut got) {
            assert_eq!(got, want, "fast path differs on {t:?}");
        } else {
            assert!(
                got.is_empty(),
                "a declined text leaves the output untouched"
            );
            assert!(
                !t.is_ascii() || t.to_ascii_lowercase().contains("[mask]") || t.contains("[CLS]"),
                "declined {t:?}"
            );
        }
        assert_eq!(tok.ids(t).unwrap(), want);
    }
}

#[test]
fn vocab_txt_tokenizer_matches_tokenizer_json() {
    let json = Tokenizer::load(&common::model()).unwrap();
    let vocab = Tokenizer::load(&common::model().join("vocab.txt")).unwrap();
    for t in [
        "The quick brown fox, naïvely!",
        "unaffordable tokenization",
        "[MASK] x",
    ] {
        assert_eq!(json.ids(t).unwrap(), vocab.ids(t).unwrap(), "{t}");
    }
}
