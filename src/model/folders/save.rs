//! Writing model folders that transformers and sentence-transformers load unchanged: config.json,
//! model.safetensors, the tokenizer files, and for a sentence encoder modules.json, 1_Pooling and
//! sentence_bert_config.json; a cross-encoder as BertForSequenceClassification; a Condenser as a
//! plain BERT backbone plus its head. Every file is written atomically.
use super::folder::ModelFolder;
use crate::data::{write_atomic, write_with_path};
use crate::error::{Context, Error, Result};
use crate::model::Pooling;
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

/// Named tensors, as a model folder or checkpoint stores them.
pub type Weights = HashMap<String, Tensor>;

/// Save named tensors as safetensors, atomically, a tensor at a time: each is copied to the
/// host as it is written (a GPU's tensors too), so the host never holds the whole file (a
/// checkpoint's optimizer moments are twice the model).
pub fn save_tensors(tensors: &Weights, path: &Path) -> Result<()> {
    write_with_path(path, |tmp| {
        safetensors::serialize_to_file(tensors.iter().map(|(k, v)| (k.as_str(), v)), None, tmp)
            .map_err(|e| Error::file(path, e))
    })
}

/// Tensors of the source checkpoint that training never touches (BERT's pooler) are carried
/// over, so transformers' AutoModel loads the folder without newly initialised weights (and a
/// cross-encoder started from it gets the pooler it was trained with).
fn carry_pooler(src: &ModelFolder, weights: &mut Weights) -> Result<()> {
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
    Ok(())
}

/// A plain HF BertModel folder: config.json, the backbone's weights (no "bert." prefix, the
/// pooler carried over), the tokenizer files.
fn save_backbone(src: &ModelFolder, mut backbone: Weights, dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| Error::file(dir, e))?;
    carry_pooler(src, &mut backbone)?;
    write_json(&dir.join("config.json"), &config_json(src, "BertModel")?)?;
    save_tensors(&backbone, &dir.join("model.safetensors"))?;
    copy_tokenizer_files(src, dir)
}

/// A sentence-transformers folder: Transformer at the root (BertModel weights), 1_Pooling, and
/// 2_Normalize when the encoder normalises; a trained head of the loss (SoftmaxLoss' classifier)
/// beside it as `<head name>.safetensors`.
pub fn save_sentence_encoder(
    src: &ModelFolder,
    backbone: Weights,
    layout: &EncoderLayout,
    head: Option<(&str, Weights)>,
    dir: &Path,
) -> Result<()> {
    let h = src.config.hidden_size;
    save_backbone(src, backbone, dir)?;
    std::fs::create_dir_all(dir.join("1_Pooling")).map_err(|e| Error::file(dir, e))?;
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
    // the start's prompts go on with the model, as sentence-transformers saves them
    let mut pooling = layout.pooling.to_json(h);
    pooling["include_prompt"] = src.prompts.include_prompt.into();
    write_json(&dir.join("1_Pooling/config.json"), &pooling)?;
    let prompts: serde_json::Map<String, serde_json::Value> = src
        .prompts
        .named
        .iter()
        .map(|(k, v)| (k.clone(), v.clone().into()))
        .collect();
    write_json(
        &dir.join("sentence_bert_config.json"),
        &serde_json::json!({"max_seq_length": layout.max_seq_length, "do_lower_case": false}),
    )?;
    write_json(
        &dir.join("config_sentence_transformers.json"),
        &serde_json::json!({
            "__version__": {"condenser": env!("CARGO_PKG_VERSION")},
            "prompts": prompts,
            "default_prompt_name": src.prompts.default_name,
            "similarity_fn_name": src.similarity_fn_name.as_deref().unwrap_or("cosine")
        }),
    )?;
    if let Some((name, w)) = head {
        save_tensors(&w, &dir.join(format!("{name}.safetensors")))?;
    }
    Ok(())
}

/// An HF BertForSequenceClassification folder: config.json with the label count and the
/// cross-encoder's max length, all weights under their transformers names, the tokenizer files.
pub fn save_cross_encoder(
    src: &ModelFolder,
    weights: &Weights,
    num_labels: usize,
    max_len: usize,
    dir: &Path,
) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| Error::file(dir, e))?;
    let mut cfg = config_json(src, "BertForSequenceClassification")?;
    let labels: serde_json::Map<String, serde_json::Value> = (0..num_labels)
        .map(|i| (i.to_string(), format!("LABEL_{i}").into()))
        .collect();
    let ids: serde_json::Map<String, serde_json::Value> = (0..num_labels)
        .map(|i| (format!("LABEL_{i}"), i.into()))
        .collect();
    cfg["id2label"] = labels.into();
    cfg["label2id"] = ids.into();
    cfg["max_length"] = max_len.into();
    write_json(&dir.join("config.json"), &cfg)?;
    save_tensors(weights, &dir.join("model.safetensors"))?;
    copy_tokenizer_files(src, dir)
}

/// The file beside a Condenser backbone that holds its head (head layers and MLM head).
pub const CONDENSER_HEAD: &str = "condenser_head.safetensors";

/// A Condenser: the backbone (weights under "bert.") as a plain HF BERT folder, a drop-in for the
/// model it started from, and every other tensor (the head) in condenser_head.safetensors.
pub fn save_condenser(src: &ModelFolder, weights: &Weights, dir: &Path) -> Result<()> {
    let (mut backbone, mut head) = (Weights::new(), Weights::new());
    for (name, t) in weights {
        match name.strip_prefix("bert.") {
            Some(b) => backbone.insert(b.to_string(), t.clone()),
            None => head.insert(name.clone(), t.clone()),
        };
    }
    save_backbone(src, backbone, dir)?;
    save_tensors(&head, &dir.join(CONDENSER_HEAD))
}

fn module(idx: usize, path: &str, ty: &str) -> serde_json::Value {
    serde_json::json!({
        "idx": idx,
        "name": idx.to_string(),
        "path": path,
        "type": format!("sentence_transformers.models.{ty}")
    })
}
