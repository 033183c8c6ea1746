//! Parity with sentence-transformers on all-MiniLM-L6-v2: the fixture's embeddings.
mod common;
use candle_core::Device;
use condenser::model::SentenceEncoder;
use indicatif::ProgressBar;

#[test]
fn half_precision_stays_within_2e2_cosine() {
    let (sentences, want) = common::fixture_embeddings();
    let sentences: Vec<&str> = sentences.iter().map(String::as_str).collect();
    for dtype in [candle_core::DType::BF16, candle_core::DType::F16] {
        let enc = SentenceEncoder::load_as(&common::model(), &Device::Cpu, dtype).unwrap();
        assert_eq!(enc.bert.dtype(), dtype);
        let got = enc.encode(&sentences, 16, &ProgressBar::hidden()).unwrap();
        let rows: Vec<Vec<f32>> = (0..got.len()).map(|i| got.row(i).to_vec()).collect();
        let (worst, max_diff) = common::worst_cosine_and_max_diff(&rows, &want);
        assert!(worst > 0.98, "{dtype:?}: worst cosine {worst}");
        // computed in half precision, not silently in f32
        assert!(max_diff > 1e-5, "{dtype:?}: max abs diff {max_diff}");
        eprintln!("{dtype:?}: worst cosine {worst:.6}, max abs diff {max_diff:.2e}");
    }
}

#[test]
fn embeddings_match_sentence_transformers_within_3e7() {
    let (sentences, want) = common::fixture_embeddings();
    let sentences: Vec<&str> = sentences.iter().map(String::as_str).collect();
    assert_eq!(sentences.len(), 64);
    let enc = SentenceEncoder::load(&common::model(), &Device::Cpu).unwrap();
    assert_eq!(enc.max_seq_length, 256);
    for batch_size in [1, 7, 64] {
        let got = enc
            .encode(&sentences, batch_size, &ProgressBar::hidden())
            .unwrap();
        assert_eq!((got.len(), got.dim), (64, 384));
        let mut max_diff = 0f64;
        for (i, w) in want.iter().enumerate() {
            for (a, b) in got.row(i).iter().zip(w) {
                max_diff = max_diff.max((*a as f64 - b).abs());
            }
        }
        // README's figure: embeddings equal sentence-transformers' to 3e-7
        assert!(
            max_diff < 3e-7,
            "batch {batch_size}: max abs diff {max_diff}"
        );
        eprintln!("batch {batch_size}: max abs diff {max_diff:.2e}");
    }
}

#[test]
fn stsb_dev_and_test_match_fixture_to_its_six_decimals() {
    let fx = common::fixture();
    let enc = SentenceEncoder::load(&common::model(), &Device::Cpu).unwrap();
    for (split, key) in [("dev", "stsb-dev"), ("test", "stsb-test")] {
        let path = common::data(&format!("stsb/{split}.parquet"));
        use condenser::eval::{sts::StsEvaluator, Evaluator, Model};
        let got = StsEvaluator::read(&path, &Default::default())
            .unwrap()
            .run(&Model::encoder(&enc), 32, &ProgressBar::hidden())
            .unwrap()
            .metrics;
        let want = fx["sts"][key].as_object().unwrap();
        assert_eq!(got.len(), want.len(), "same metric names");
        for (name, value) in &got {
            let w = want[name]
                .as_f64()
                .unwrap_or_else(|| panic!("fixture lacks {name}"));
            // the fixture keeps 6 decimals: equal to them is within half a unit of the last (README's
            // 2e-7 is against sentence-transformers' evaluators run live, benches/st_eval_reference.py).
            // A Spearman coefficient is a rank statistic: two pairs whose scores differ by less
            // than the encode's rounding (embeddings within 3e-7 of sentence-transformers' on every
            // CPU class, above) may trade ranks, which moves it by up to 12 / (n^2 - 1) for n pairs
            // (5.3e-6 at STSb dev's 1,500). On a Zen 4 (2026-11-29) dev's spearman_euclidean read
            // 0.8671644 against 0.867163, one such trade: spearman_cosine on the same embeddings,
            // the same order in exact arithmetic for unit vectors, matched to 1.2e-7, and dev's
            // pairs 1,007 and 1,051 (gold 4.0 and 3.0) lie 3.1e-7 apart in euclidean distance
            // (0.678045, in f64 from `condenser encode`'s embeddings). So a Spearman metric may
            // be one trade away; the Pearson ones, continuous, may not.
            let tol = if name.starts_with("spearman") {
                5e-7 + 6e-6
            } else {
                5e-7
            };
            assert!((value - w).abs() <= tol, "{key} {name}: {value} vs {w}");
        }
    }
}
