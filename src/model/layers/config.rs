use crate::error::{Error, Result};
use candle_core::Tensor;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// config.json's hidden_act: the activations BERT checkpoints use. Any other name is refused
/// when the config is read, naming the ones supported.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Activation {
    /// GELU with the exact erf (BERT's).
    #[default]
    Gelu,
    /// GELU's tanh approximation (two names for it in transformers).
    GeluNew,
    GeluPytorchTanh,
    Relu,
}

impl Activation {
    pub fn forward(self, x: &Tensor) -> candle_core::Result<Tensor> {
        match self {
            Activation::Gelu => crate::model::kernels::gelu::gelu_erf(x),
            Activation::GeluNew | Activation::GeluPytorchTanh => x.gelu(),
            Activation::Relu => x.relu(),
        }
    }
}
fn d_dropout() -> f64 {
    0.1
}
fn d_positions() -> usize {
    512
}
fn d_types() -> usize {
    2
}
fn d_eps() -> f64 {
    1e-12
}

/// HF BertConfig (config.json). Keys we do not use are kept in `extra` so that saving writes
/// them back and transformers still recognises the folder.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BertConfig {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    #[serde(default)]
    pub hidden_act: Activation,
    #[serde(default = "d_dropout")]
    pub hidden_dropout_prob: f64,
    #[serde(default = "d_dropout")]
    pub attention_probs_dropout_prob: f64,
    #[serde(default = "d_positions")]
    pub max_position_embeddings: usize,
    #[serde(default = "d_types")]
    pub type_vocab_size: usize,
    #[serde(default = "d_eps")]
    pub layer_norm_eps: f64,
    #[serde(default)]
    pub pad_token_id: u32,
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

impl BertConfig {
    pub fn load(path: &Path) -> Result<BertConfig> {
        let text = std::fs::read_to_string(path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                Error::file(path, "missing config.json: not a Hugging Face model folder")
            }
            _ => Error::file(path, e),
        })?;
        let cfg: BertConfig = serde_json::from_str(&text)
            .map_err(|e| Error::file(path, format!("not a BERT config: {e}")))?;
        cfg.validate().map_err(|m| Error::file(path, m))?;
        Ok(cfg)
    }

    fn validate(&self) -> std::result::Result<(), String> {
        if self.num_attention_heads == 0
            || !self.hidden_size.is_multiple_of(self.num_attention_heads)
        {
            return Err(format!(
                "hidden_size {} is not a multiple of num_attention_heads {}",
                self.hidden_size, self.num_attention_heads
            ));
        }
        Ok(())
    }

    /// config.json's hidden_dropout_prob and attention_probs_dropout_prob.
    pub fn dropout_rates(&self) -> crate::model::kernels::dropout::DropoutRates {
        crate::model::kernels::dropout::DropoutRates {
            hidden: self.hidden_dropout_prob as f32,
            attention: self.attention_probs_dropout_prob as f32,
        }
    }

    /// The sequence length to run at when `asked` tokens are wanted: at most the position table
    /// (past it the model has no position embedding), with a note saying so when it cuts.
    pub fn fit_length(&self, asked: usize) -> (usize, Option<String>) {
        let max = self.max_position_embeddings;
        match asked > max {
            true => (
                max,
                Some(format!(
                    "--max-seq-length {asked} is past the model's {max} positions: {max} used"
                )),
            ),
            false => (asked, None),
        }
    }

    pub fn head_dim(&self) -> usize {
        self.hidden_size / self.num_attention_heads
    }
}
