//! Writing model folders that transformers and sentence-transformers load unchanged: config.json,
//! model.safetensors, the tokenizer files, and for a sentence encoder modules.json, 1_Pooling and
//! sentence_bert_config.json. Every file is written atomically.
use super::{ModelFolder, Pooling};
use crate::data::write_atomic;
use crate::error::{Context, Error, Result};
use candle_core::Tensor;
use std::collections::HashMap;
use std::path::Path;

/// The tokenizer files of `src`, copied as they are (padding/truncation settings included, as
/// sentence-transformers keeps them).
pub fn copy_tokenizer_files(src: &ModelFolder, dir: &Path) -> Result<()> {
    for f in [
        "tokenizer.json",
        "vocab.txt",
        "tokenizer_config.json",
        "special_tokens_map.json",
    ] {
        let from = src.transformer_dir.join(f);
        if from.is_file() {
            let bytes = std::fs::read(&from).map_err(|e| Error::file(&from, e))?;
            write_atomic(&dir.join(f), &bytes)?;
        }
    }
    Ok(())
}

pub fn write_json(path: &Path, v: &serde_json::Value) -> Result<()> {
    write_atomic(path, serde_json::to_string_pretty(v).unwrap().as_bytes())
}

/// `src`'s config.json with `architectures` set.
pub fn config_json(src: &ModelFolder, architecture: &str) -> Result<serde_json::Value> {
    let mut cfg = serde_json::to_value(&src.config).doing("writing config.json")?;
    cfg["architectures"] = serde_json::json!([architecture]);
    cfg["model_type"] = "bert".into();
    Ok(cfg)
}

/// How the saved sentence encoder pools and truncates.
pub struct EncoderLayout {
    pub pooling: Pooling,
    pub normalize: bool,
    pub max_seq_length: usize,
}

/// A sentence-transformers folder: Transformer at the root (BertModel weights, named without a
/// "bert." prefix), 1_Pooling, and 2_Normalize when the encoder normalises. Tensors of the source
/// checkpoint that training did not touch (the pooler) are carried over, so transformers' AutoModel
/// loads the folder without fresh weights.
pub fn save_sentence_encoder(
    src: &ModelFolder,
    weights: HashMap<String, Tensor>,
    layout: &EncoderLayout,
    dir: &Path,
) -> Result<()> {
    std::fs::create_dir_all(dir.join("1_Pooling")).map_err(|e| Error::file(dir, e))?;
    let mut weights = weights;
    let vb = src.var_builder(candle_core::DType::F32, &candle_core::Device::Cpu)?;
    let h = src.config.hidden_size;
    for (name, shape) in [
        ("pooler.dense.weight", vec![h, h]),
        ("pooler.dense.bias", vec![h]),
    ] {
        if !weights.contains_key(name) && vb.contains_tensor(name) {
            let t = vb
                .get(shape, name)
                .map_err(|e| Error::file(&src.weights, e))?;
            weights.insert(name.to_string(), t);
        }
    }
    write_json(&dir.join("config.json"), &config_json(src, "BertModel")?)?;
    crate::train::params::save_tensors(&weights, &dir.join("model.safetensors"))?;
    copy_tokenizer_files(src, dir)?;
    let mut modules = vec![
        module(0, "", "Transformer"),
        module(1, "1_Pooling", "Pooling"),
    ];
    if layout.normalize {
        std::fs::create_dir_all(dir.join("2_Normalize")).map_err(|e| Error::file(dir, e))?;
        modules.push(module(2, "2_Normalize", "Normalize"));
    } else if dir.join("2_Normalize").is_dir() {
        let _ = std::fs::remove_dir(dir.join("2_Normalize"));
    }
    write_json(
        &dir.join("modules.json"),
        &serde_json::Value::Array(modules),
    )?;
    write_json(
        &dir.join("1_Pooling/config.json"),
        &layout.pooling.to_json(h),
    )?;
    write_json(
        &dir.join("sentence_bert_config.json"),
        &serde_json::json!({"max_seq_length": layout.max_seq_length, "do_lower_case": false}),
    )?;
    write_json(
        &dir.join("config_sentence_transformers.json"),
        &serde_json::json!({
            "__version__": {"condenser": env!("CARGO_PKG_VERSION")},
            "prompts": {},
            "default_prompt_name": null,
            "similarity_fn_name": "cosine"
        }),
    )
}

fn module(idx: usize, path: &str, ty: &str) -> serde_json::Value {
    serde_json::json!({
        "idx": idx,
        "name": idx.to_string(),
        "path": path,
        "type": format!("sentence_transformers.models.{ty}")
    })
}
