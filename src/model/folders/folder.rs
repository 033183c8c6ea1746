//! Reading model folders: a plain Hugging Face BERT folder (config.json + model.safetensors or
//! pytorch_model.bin + tokenizer.json or vocab.txt) or a sentence-transformers folder on top of it
//! (modules.json, 1_Pooling/config.json, Normalize, sentence_bert_config.json).
use crate::error::{Error, Result};
use crate::model::encoder::Prompts;
use crate::model::{Bert, BertConfig, Pooling};
use crate::tokenize::Tokenizer;
use candle_core::{DType, Device};
use candle_nn::VarBuilder;
use std::path::{Path, PathBuf};

/// What a model folder says, before any weights are loaded.
#[derive(Clone, Debug)]
pub struct ModelFolder {
    pub dir: PathBuf,
    /// The folder holding config.json and the weights (the Transformer module's path).
    pub transformer_dir: PathBuf,
    pub config: BertConfig,
    pub weights: PathBuf,
    pub pooling: Pooling,
    /// Where `pooling` came from: the folder's 1_Pooling, or a default for a folder without one.
    pub pooling_from: PoolingFrom,
    pub normalize: bool,
    pub max_seq_length: usize,
    /// config_sentence_transformers.json's prompts and default prompt, and the Pooling's
    /// include_prompt: applied by the encoder as sentence-transformers applies them.
    pub prompts: Prompts,
    /// config_sentence_transformers.json's similarity_fn_name (None: not named; cosine).
    pub similarity_fn_name: Option<String>,
}

/// Where a folder's pooling comes from. A folder without a Pooling module is pooled by a default
/// that the commands name in one line, since it decides every embedding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolingFrom {
    /// The sentence-transformers folder's 1_Pooling/config.json.
    Module,
    /// A plain HF BERT folder: mean pooling, as sentence-transformers gives it.
    PlainDefault,
    /// A masked-LM BERT (config.json's architectures BertForMaskedLM or BertForPreTraining):
    /// `[CLS]`, the embedding Condenser's paper fine-tunes (its Table 1) and a masked-LM BERT's
    /// pre-training reads for next-sentence prediction.
    MlmDefault,
}

/// The architectures whose folders pool by `[CLS]` by default.
const MLM_ARCHITECTURES: [&str; 2] = ["BertForMaskedLM", "BertForPreTraining"];

fn read_json(path: &Path) -> Result<serde_json::Value> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::file(path, e))?;
    serde_json::from_str(&text).map_err(|e| Error::file(path, format!("invalid JSON: {e}")))
}

impl ModelFolder {
    /// Read the folder at `dir`, or the installed model `dir` names (folders::home).
    pub fn open(dir: &Path) -> Result<ModelFolder> {
        let resolved = super::home::resolve(dir);
        let dir = resolved.as_path();
        if !dir.is_dir() {
            return Err(Error::file(dir, super::home::missing_hint(dir)));
        }
        let mut transformer_dir = dir.to_path_buf();
        let mut pooling = None;
        let mut include_prompt = true;
        let mut normalize = false;
        let modules = dir.join("modules.json");
        if modules.is_file() {
            let v = read_json(&modules)?;
            let list = v
                .as_array()
                .ok_or_else(|| Error::file(&modules, "expected a JSON list of modules"))?;
            for m in list {
                let ty = m.get("type").and_then(|t| t.as_str()).unwrap_or("");
                let path = dir.join(m.get("path").and_then(|p| p.as_str()).unwrap_or(""));
                match ty.rsplit('.').next().unwrap_or("") {
                    "Transformer" => transformer_dir = path,
                    "Pooling" => {
                        let cfg = path.join("config.json");
                        pooling = Some(Pooling::load(&cfg)?);
                        include_prompt = read_json(&cfg)?
                            .get("include_prompt")
                            .and_then(|b| b.as_bool())
                            .unwrap_or(true);
                    }
                    "Normalize" => normalize = true,
                    other => {
                        return Err(Error::file(
                            &modules,
                            format!("unsupported module type '{other}' ({ty})"),
                        ))
                    }
                }
            }
        }
        let config = BertConfig::load(&transformer_dir.join("config.json"))?;
        let weights = ["model.safetensors", "pytorch_model.bin"]
            .iter()
            .map(|f| transformer_dir.join(f))
            .find(|p| p.is_file())
            .ok_or_else(|| {
                Error::file(
                    &transformer_dir,
                    "missing weights: no model.safetensors or pytorch_model.bin",
                )
            })?;
        let st_cfg = transformer_dir.join("sentence_bert_config.json");
        let max_seq_length = if st_cfg.is_file() {
            read_json(&st_cfg)?
                .get("max_seq_length")
                .and_then(|m| m.as_u64())
                .map(|m| m as usize)
        } else {
            None
        }
        .unwrap_or(512)
        .min(config.max_position_embeddings);
        let is_mlm = config
            .extra
            .get("architectures")
            .and_then(|a| a.as_array())
            .is_some_and(|a| a.iter().any(|x| MLM_ARCHITECTURES.iter().any(|m| x == m)));
        let (pooling, pooling_from) = match (pooling, is_mlm) {
            (Some(p), _) => (p, PoolingFrom::Module),
            (None, true) => (Pooling::CLS, PoolingFrom::MlmDefault),
            // a plain HF folder gets mean pooling, as sentence-transformers gives it
            (None, false) => (Pooling::MEAN, PoolingFrom::PlainDefault),
        };
        let st_config = dir.join("config_sentence_transformers.json");
        let st = match st_config.is_file() {
            true => Some(read_json(&st_config)?),
            false => None,
        };
        let prompts = Prompts::from_config(
            st.as_ref().map(|v| (st_config.as_path(), v)),
            include_prompt,
        )?;
        let similarity_fn_name = st
            .as_ref()
            .and_then(|v| v.get("similarity_fn_name"))
            .and_then(|n| n.as_str())
            .map(str::to_string);
        Ok(ModelFolder {
            prompts,
            similarity_fn_name,
            dir: dir.to_path_buf(),
            transformer_dir,
            config,
            weights,
            pooling,
            pooling_from,
            normalize,
            max_seq_length,
        })
    }

    /// The line that says a folder's default prompt is applied (None without one): it changes
    /// every embedding, so a command names it, as the pooling's default is named.
    pub fn prompt_note(&self) -> Option<String> {
        let (name, text) = self.prompts.default_prompt()?;
        Some(format!(
            "{}: config_sentence_transformers.json's default prompt '{name}' ({text:?}) is put \
             before every text, as sentence-transformers' encode does{}",
            self.dir.display(),
            match self.prompts.include_prompt {
                true => "",
                false => " (its tokens left out of the pooling: include_prompt false)",
            }
        ))
    }

    /// The line that says which pooling a folder without a Pooling module gets (None for a
    /// sentence-transformers folder, whose pooling is its own).
    pub fn pooling_note(&self) -> Option<String> {
        let why = match self.pooling_from {
            PoolingFrom::Module => return None,
            PoolingFrom::PlainDefault => {
                "mean, a plain BERT folder's default (as sentence-transformers)"
            }
            PoolingFrom::MlmDefault => {
                "cls ([CLS]), a masked-LM BERT's default (as Condenser's paper fine-tunes it)"
            }
        };
        Some(format!(
            "{}: no Pooling module; pooling {why}; --pooling names another",
            self.dir.display()
        ))
    }

    pub fn tokenizer(&self) -> Result<Tokenizer> {
        Tokenizer::load(&self.transformer_dir)
    }

    /// A VarBuilder over the weights, rooted at the BERT encoder (a "bert." prefix is looked through).
    pub fn var_builder(&self, dtype: DType, device: &Device) -> Result<VarBuilder<'static>> {
        let vb = self.raw_var_builder(dtype, device)?;
        Ok(
            if vb.contains_tensor("bert.embeddings.word_embeddings.weight") {
                vb.pp("bert")
            } else {
                vb
            },
        )
    }

    /// A VarBuilder over the weights under their names in the file.
    pub fn raw_var_builder(&self, dtype: DType, device: &Device) -> Result<VarBuilder<'static>> {
        let w = &self.weights;
        let vb = if w.extension().is_some_and(|e| e == "bin") {
            VarBuilder::from_pth(w, dtype, device)
        } else {
            // SAFETY: the file is mapped read-only; nothing in this process writes to it
            unsafe { VarBuilder::from_mmaped_safetensors(&[w], dtype, device) }
        }
        .map_err(|e| Error::file(w, format!("unreadable weights: {e}")))?;
        Ok(vb)
    }

    /// The BERT encoder with this folder's weights; shape mismatches name the weights file.
    pub fn load_bert(&self, dtype: DType, device: &Device) -> Result<Bert> {
        let vb = self.var_builder(dtype, device)?;
        if !vb.contains_tensor("embeddings.word_embeddings.weight") {
            return Err(Error::file(
                &self.weights,
                "no BERT weights (embeddings.word_embeddings.weight missing)",
            ));
        }
        Bert::load(vb, &self.config).map_err(|e| {
            Error::file(
                &self.weights,
                format!("weights do not match config.json: {e}"),
            )
        })
    }
}
