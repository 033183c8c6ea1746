//! cross.rs's route on a GPU (`scores_on`) on the emulated device against the CPU engine's
//! `predict`: all-MiniLM-L6-v2's BERT under a pooler and a classifier of fixed values, one label
//! (sigmoid) and three (softmax), pairs of several lengths in batches of three, the last ragged.
use super::CrossEncoderModel;
use crate::model::engine::gpu::{assert_close as close, Emulated};
use crate::model::kernels::test_data;
use crate::model::{CrossEncoder, PairTokenizer, SentenceEncoder};
use candle_core::{DType, Device, Tensor};
use indicatif::ProgressBar;

const PAIRS: [(&str, &str); 7] = [
    ("A man is playing a flute.", "A man plays the flute."),
    (
        "Dogs.",
        "A woman is slicing an onion with a large knife on a wooden board.",
    ),
    (
        "Three people are riding horses along a beach at sunset.",
        "Stocks fell sharply on Monday as investors weighed the central bank's comments.",
    ),
    ("A child laughs.", "A child is laughing."),
    ("Two men play chess.", ""),
    (
        "The cat sat on the mat.",
        "The rain kept falling on the roof of the old house.",
    ),
    ("", "Nothing."),
];

/// MiniLM's weights as a cross-encoder's `bert.*`, and a head of fixed values.
fn model(labels: usize) -> CrossEncoderModel {
    let dir = crate::runtime::test_root().join("datasets/model/all-MiniLM-L6-v2");
    // its config and tokenizer as the sentence encoder loads them
    let enc = SentenceEncoder::load(&dir, &Device::Cpu).unwrap();
    let mut w: std::collections::HashMap<String, Tensor> =
        candle_core::safetensors::load(dir.join("model.safetensors"), &Device::Cpu)
            .unwrap()
            .into_iter()
            .map(|(k, v)| (format!("bert.{}", k.trim_start_matches("bert.")), v))
            .collect();
    let h = enc.bert.config.hidden_size;
    let t = |shape: &[usize], seed: u32| {
        let n = shape.iter().product();
        let v: Vec<f32> = test_data(n, seed).iter().map(|x| 0.1 * x).collect();
        Tensor::from_vec(v, shape, &Device::Cpu).unwrap()
    };
    w.insert("bert.pooler.dense.weight".into(), t(&[h, h], 1));
    w.insert("bert.pooler.dense.bias".into(), t(&[h], 2));
    w.insert("classifier.weight".into(), t(&[labels, h], 3));
    w.insert("classifier.bias".into(), t(&[labels], 4));
    let vb = candle_nn::VarBuilder::from_tensors(w, DType::F32, &Device::Cpu);
    CrossEncoderModel {
        model: CrossEncoder::load(vb, &enc.bert.config, labels).unwrap(),
        tok: PairTokenizer::new(enc.tokenizer.clone(), 128).unwrap(),
        device: Device::Cpu,
    }
}

#[test]
fn scoring_on_the_engine_matches_the_cpu_engine() {
    for labels in [1, 3] {
        let Some(dev) = Emulated::for_test("cross-encoder scoring on the emulated GPU engine")
        else {
            return;
        };
        let ce = model(labels);
        let hidden = ProgressBar::hidden();
        let want = ce.predict(&PAIRS, 3, &hidden).unwrap();
        let enc: Vec<(Vec<u32>, Vec<u32>)> = PAIRS
            .iter()
            .map(|(a, b)| ce.tok.encode(a, b).unwrap())
            .collect();
        let got = ce.scores_on(dev, &enc, 3, &hidden).unwrap();
        assert_eq!(got.len(), PAIRS.len());
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g.len(), labels);
            close(&format!("{labels} labels, pair {i}"), g, w, 2e-5);
        }
        // the pairs' scores differ (a head of fixed values still tells them apart)
        assert!(want.windows(2).any(|p| (p[0][0] - p[1][0]).abs() > 1e-4));
    }
}

/// --dtype bf16 on a GPU (folders/inference.rs sets the cross-encoder's precision where the
/// engine takes it): the engine's bf16 products with f32 sums, within bf16's rounding of the
/// f32 scores and not equal to them (the precision reached the products).
#[test]
fn scoring_on_the_engine_in_bf16() {
    let Some(dev) = Emulated::for_test("cross-encoder bf16 scoring on the emulated GPU engine")
    else {
        return;
    };
    let mut ce = model(3);
    let hidden = ProgressBar::hidden();
    let want = ce.predict(&PAIRS, 3, &hidden).unwrap();
    ce.model
        .set_precision(crate::model::kernels::precision::Precision::Bf16)
        .unwrap();
    let enc: Vec<(Vec<u32>, Vec<u32>)> = PAIRS
        .iter()
        .map(|(a, b)| ce.tok.encode(a, b).unwrap())
        .collect();
    let got = ce.scores_on(dev, &enc, 3, &hidden).unwrap();
    let mut worst = 0f32;
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        close(&format!("bf16, pair {i}"), g, w, 2e-2);
        worst = g
            .iter()
            .zip(w)
            .fold(worst, |m, (a, b)| m.max((a - b).abs()));
    }
    assert!(
        worst > 1e-6,
        "bf16 scores equal f32's: the products ran in f32"
    );
}
