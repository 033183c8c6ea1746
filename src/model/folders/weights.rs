//! A weights file (safetensors, or PyTorch's pickle for `.bin`) as named tensors.
use crate::error::{Error, Result};
use candle_core::{Device, Tensor};
use std::collections::HashMap;
use std::path::Path;

pub fn read_weights(path: &Path, device: &Device) -> Result<HashMap<String, Tensor>> {
    let bad = |e: candle_core::Error| Error::file(path, format!("unreadable weights: {e}"));
    if path.extension().is_some_and(|e| e == "bin") {
        Ok(candle_core::pickle::read_all(path)
            .map_err(bad)?
            .into_iter()
            .collect())
    } else {
        candle_core::safetensors::load(path, device).map_err(bad)
    }
}
