//! on_gpu.rs's encode on the emulated device against the CPU engine's encode of the same texts:
//! all-MiniLM-L6-v2 as it ships (mean pooling, normalised), and its [CLS] and mean rows together
//! without normalising; batches of four, the last ragged, longest first as candle's route.
use super::encode;
use crate::model::engine::gpu::{assert_close as close, DevicePooling, Emulated};
use crate::model::{Pooling, SentenceEncoder};
use indicatif::ProgressBar;

const TEXTS: [&str; 9] = [
    "A man is playing a flute.",
    "A woman is slicing an onion with a large knife on a wooden cutting board in the kitchen.",
    "Dogs.",
    "The cat sat on the mat while the rain kept falling on the roof of the old house.",
    "Three people are riding horses along a beach at sunset, the waves breaking behind them.",
    "A child laughs.",
    "Stocks fell sharply on Monday as investors weighed the central bank's latest comments.",
    "Two men play chess.",
    "",
];

fn same_embeddings(enc: &SentenceEncoder) {
    let Some(dev) = Emulated::for_test("encoding on the emulated GPU engine") else {
        return;
    };
    let hidden = ProgressBar::hidden();
    let want = enc.encode(&TEXTS, 4, &hidden).unwrap();
    let seqs: Vec<Vec<u32>> = TEXTS.iter().map(|t| enc.token_ids(t).unwrap()).collect();
    let pooling = DevicePooling::of(enc.pooling).unwrap();
    let got = encode(enc, dev, pooling, &seqs, 4, &hidden).unwrap();
    assert_eq!(got.len(), TEXTS.len());
    for (i, row) in got.iter().enumerate() {
        let w = &want.data[i * want.dim..(i + 1) * want.dim];
        close(&format!("text {i}"), row, w, 2e-5);
    }
}

#[test]
fn encoding_on_the_engine_matches_the_cpu_engine() {
    let dir = crate::runtime::test_root().join("datasets/model/all-MiniLM-L6-v2");
    let enc = SentenceEncoder::load(&dir, &candle_core::Device::Cpu).unwrap();
    same_embeddings(&enc);
    let mut both = SentenceEncoder::load(&dir, &candle_core::Device::Cpu).unwrap();
    both.pooling = Pooling {
        cls: true,
        max: false,
        mean: true,
        mean_sqrt_len: false,
    };
    both.normalize = false;
    same_embeddings(&both);
}
