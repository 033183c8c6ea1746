//! Models loaded from their folders: a sentence encoder (tokenizer, BERT, pooling, normalisation,
//! max length from the folder) and a trained cross-encoder (refused when the folder has no
//! classification head).
use super::folder::ModelFolder;
use crate::error::{Error, Result};
use crate::model::{CrossEncoder, CrossEncoderModel, PairTokenizer, SentenceEncoder};
use candle_core::{DType, Device};
use std::path::Path;

impl SentenceEncoder {
    pub fn load(dir: &Path, device: &Device) -> Result<SentenceEncoder> {
        Self::load_as(dir, device, DType::F32)
    }

    /// As `load`, computing in `dtype` (bf16/f16 for speed on a GPU); embeddings come out as f32.
    pub fn load_as(dir: &Path, device: &Device, dtype: DType) -> Result<SentenceEncoder> {
        let folder = ModelFolder::open(dir)?;
        let tokenizer = folder.tokenizer()?;
        let bert = folder.load_bert(dtype, device)?;
        let mut enc = SentenceEncoder::new(
            bert,
            tokenizer,
            folder.pooling,
            folder.normalize,
            folder.max_seq_length,
            device,
        )?;
        enc.prompts = folder.prompts;
        Ok(enc)
    }
}

impl CrossEncoderModel {
    /// A trained cross-encoder folder (HF BertForSequenceClassification): refused, naming the
    /// weights file, when it has no classification head (a bi-encoder or plain BERT folder).
    pub fn load(dir: &Path, device: &Device) -> Result<CrossEncoderModel> {
        let folder = ModelFolder::open(dir)?;
        let vb = folder.raw_var_builder(DType::F32, device)?;
        if !vb.contains_tensor("classifier.weight")
            || !vb.contains_tensor("bert.embeddings.word_embeddings.weight")
        {
            return Err(Error::file(
                &folder.weights,
                "no classification head (bert.* and classifier.weight): not a cross-encoder; \
                 train one with train-cross-encoder",
            ));
        }
        let extra = &folder.config.extra;
        let num_labels = extra
            .get("id2label")
            .and_then(|m| m.as_object())
            .map(|m| m.len())
            .or_else(|| {
                extra
                    .get("num_labels")
                    .and_then(|n| n.as_u64())
                    .map(|n| n as usize)
            })
            .unwrap_or(1);
        let max_len = extra
            .get("max_length")
            .and_then(|m| m.as_u64())
            .map(|m| m as usize)
            .unwrap_or(512)
            .min(folder.config.max_position_embeddings);
        let model = CrossEncoder::load(vb, &folder.config, num_labels).map_err(|e| {
            Error::file(
                &folder.weights,
                format!("weights do not match config.json: {e}"),
            )
        })?;
        Ok(CrossEncoderModel {
            model,
            tok: PairTokenizer::new(folder.tokenizer()?, max_len)?,
            device: device.clone(),
        })
    }
}

/// Whether a model folder holds a cross-encoder (its config names BertForSequenceClassification).
pub fn is_cross_encoder(folder: &ModelFolder) -> bool {
    folder
        .config
        .extra
        .get("architectures")
        .and_then(|a| a.as_array())
        .is_some_and(|a| a.iter().any(|x| x == "BertForSequenceClassification"))
}
