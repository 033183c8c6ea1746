//! Model folders: what loads, and clear errors naming the file for what does not.
mod common;
use candle_core::Device;
use condenser::model::{ModelFolder, Pooling, SentenceEncoder};
use std::path::Path;

fn copy_model(to: &Path) {
    let from = common::model();
    for e in std::fs::read_dir(&from).unwrap() {
        let p = e.unwrap().path();
        if p.is_file() {
            std::fs::copy(&p, to.join(p.file_name().unwrap())).unwrap();
        }
    }
    std::fs::create_dir_all(to.join("1_Pooling")).unwrap();
    std::fs::copy(
        from.join("1_Pooling/config.json"),
        to.join("1_Pooling/config.json"),
    )
    .unwrap();
}

fn load_err(dir: &Path) -> String {
    match SentenceEncoder::load(dir, &Device::Cpu) {
        Ok(_) => panic!("{} should not load", dir.display()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn reads_sentence_transformers_folder() {
    let f = ModelFolder::open(&common::model()).unwrap();
    assert_eq!(f.pooling, Pooling::MEAN);
    assert!(f.normalize);
    assert_eq!(f.max_seq_length, 256);
    assert_eq!((f.config.hidden_size, f.config.num_hidden_layers), (384, 6));
}

#[test]
fn missing_config_or_weights() {
    let d = tempfile::tempdir().unwrap();
    copy_model(d.path());
    std::fs::remove_file(d.path().join("config.json")).unwrap();
    let e = load_err(d.path());
    assert!(
        e.contains("config.json") && e.contains("missing config.json"),
        "{e}"
    );
    let d = tempfile::tempdir().unwrap();
    copy_model(d.path());
    std::fs::remove_file(d.path().join("model.safetensors")).unwrap();
    let e = load_err(d.path());
    assert!(
        e.contains(&d.path().display().to_string()) && e.contains("missing weights"),
        "{e}"
    );
    let e = load_err(Path::new("/nonexistent/model"));
    assert!(
        e.contains("/nonexistent/model") && e.contains("no such model folder"),
        "{e}"
    );
}

#[test]
fn hidden_size_that_does_not_match_weights() {
    let d = tempfile::tempdir().unwrap();
    copy_model(d.path());
    let cfg = std::fs::read_to_string(d.path().join("config.json"))
        .unwrap()
        .replace("\"hidden_size\": 384", "\"hidden_size\": 768");
    std::fs::write(d.path().join("config.json"), cfg).unwrap();
    let e = load_err(d.path());
    assert!(
        e.contains("model.safetensors") && e.contains("do not match config.json"),
        "{e}"
    );
    let cfg = std::fs::read_to_string(d.path().join("config.json"))
        .unwrap()
        .replace("\"hidden_size\": 768", "\"hidden_size\": 380");
    std::fs::write(d.path().join("config.json"), cfg).unwrap();
    let e = load_err(d.path());
    assert!(
        e.contains("config.json") && e.contains("not a multiple of num_attention_heads"),
        "{e}"
    );
}

/// A plain HF folder (no sentence-transformers files) with "bert."-prefixed weights loads, with
/// mean pooling and no normalisation, and gives the same token states.
#[test]
fn plain_hf_folder_with_bert_prefix() {
    let d = tempfile::tempdir().unwrap();
    let from = common::model();
    for f in ["config.json", "tokenizer.json"] {
        std::fs::copy(from.join(f), d.path().join(f)).unwrap();
    }
    let data = std::fs::read(from.join("model.safetensors")).unwrap();
    let st = safetensors::SafeTensors::deserialize(&data).unwrap();
    let renamed: Vec<(String, safetensors::tensor::TensorView)> = st
        .tensors()
        .into_iter()
        .map(|(n, t)| (format!("bert.{n}"), t))
        .collect();
    safetensors::serialize_to_file(renamed, None, &d.path().join("model.safetensors")).unwrap();
    let plain = SentenceEncoder::load(d.path(), &Device::Cpu).unwrap();
    assert!(!plain.normalize);
    assert_eq!(plain.max_seq_length, 512);
    let st_enc = SentenceEncoder::load(&from, &Device::Cpu).unwrap();
    let pb = indicatif::ProgressBar::hidden();
    let s = [
        "A man is playing a guitar.",
        "Two dogs run through a field of tall grass.",
    ];
    let (a, b) = (
        plain.encode(&s, 2, &pb).unwrap(),
        st_enc.encode(&s, 2, &pb).unwrap(),
    );
    for i in 0..2 {
        let n: f32 = a.row(i).iter().map(|x| x * x).sum::<f32>().sqrt();
        for (x, y) in a.row(i).iter().zip(b.row(i)) {
            assert!((x / n - y).abs() < 1e-5);
        }
    }
}
