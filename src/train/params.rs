//! Trainable parameters: a VarMap whose variables the model creates by name, filled from a
//! checkpoint where it has them (looking through a missing or extra "bert." prefix), and
//! initialised as BERT does otherwise, from a seeded RNG (candle's init RNG cannot be seeded).
use crate::data::write_atomic;
use crate::error::{Error, Result};
use candle_core::{DType, Device, Tensor, Var};
use candle_nn::{VarBuilder, VarMap};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use std::path::Path;

/// Variables sorted by name: a deterministic order for updates and checkpoints.
pub fn vars(varmap: &VarMap) -> Vec<(String, Var)> {
    let data = varmap.data().lock().unwrap();
    let mut v: Vec<(String, Var)> = data.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

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

/// The variables as plain tensors (same storage, no gradient tracking). A model loaded from
/// these evaluates without recording a backward graph, which would keep every intermediate of a
/// batch alive until its end (over 1 GB for 64 pairs: pages faulted afresh each batch).
pub fn frozen(varmap: &VarMap, device: &Device) -> VarBuilder<'static> {
    let map: HashMap<String, Tensor> = vars(varmap)
        .into_iter()
        .map(|(k, v)| (k, v.as_tensor().detach()))
        .collect();
    VarBuilder::from_tensors(map, DType::F32, device)
}

/// Where the model's variables live (CPU for an empty map).
pub fn device_of(varmap: &VarMap) -> Device {
    vars(varmap)
        .first()
        .map(|(_, v)| v.device().clone())
        .unwrap_or(Device::Cpu)
}

/// Fill `varmap` from `weights`; returns the names the file did not have (initialised fresh).
pub fn fill(varmap: &VarMap, weights: &Path, seed: u64) -> Result<Vec<String>> {
    let file = read_weights(weights, &device_of(varmap))?;
    let mut rng = StdRng::seed_from_u64(seed);
    let mut fresh = Vec::new();
    for (name, var) in vars(varmap) {
        let found = [
            name.clone(),
            name.trim_start_matches("bert.").to_string(),
            format!("bert.{name}"),
        ]
        .into_iter()
        .find_map(|n| file.get(&n));
        match found {
            Some(t) => set_checked(&var, t, &name, weights)?,
            None => {
                // BERT's init: normal(0, 0.02) for matrices; biases and LayerNorm keep their constants
                if name.ends_with("weight") && !name.contains("LayerNorm") {
                    let v: Vec<f32> = (0..var.elem_count())
                        .map(|_| normal(&mut rng) * 0.02)
                        .collect();
                    var.set(
                        &Tensor::from_vec(v, var.shape(), var.device())
                            ?,
                    )
                    ?;
                }
                fresh.push(name);
            }
        }
    }
    Ok(fresh)
}

fn normal(rng: &mut StdRng) -> f32 {
    let (u1, u2): (f64, f64) = (rng.random::<f64>().max(1e-300), rng.random());
    ((-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()) as f32
}

/// Save named tensors as safetensors, atomically.
pub fn save_tensors(tensors: &HashMap<String, Tensor>, path: &Path) -> Result<()> {
    let bytes = safetensors::serialize(tensors.iter().map(|(k, v)| (k.as_str(), v)), None)
        .map_err(|e| Error::file(path, e))?;
    write_atomic(path, &bytes)
}

pub fn save_vars(varmap: &VarMap, path: &Path) -> Result<()> {
    let map: HashMap<String, Tensor> = vars(varmap)
        .into_iter()
        .map(|(k, v)| (k, v.as_tensor().clone()))
        .collect();
    save_tensors(&map, path)
}

/// Overwrite the variables that `weights` names exactly (a saved head over a fresh one).
pub fn fill_present(varmap: &VarMap, weights: &Path) -> Result<usize> {
    let file = read_weights(weights, &device_of(varmap))?;
    let mut n = 0;
    for (name, var) in vars(varmap) {
        if let Some(t) = file.get(&name) {
            set_checked(&var, t, &name, weights)?;
            n += 1;
        }
    }
    Ok(n)
}

/// Copy a checkpoint tensor into a variable, the shapes checked and the file named on error.
fn set_checked(var: &Var, t: &Tensor, name: &str, weights: &Path) -> Result<()> {
    if t.dims() != var.dims() {
        return Err(Error::file(
            weights,
            format!(
                "{name} has shape {:?}, the model needs {:?}",
                t.dims(),
                var.dims()
            ),
        ));
    }
    var.set(
        &t.to_dtype(var.dtype())
            .and_then(|t| t.to_device(var.device()))
            .map_err(|e| Error::file(weights, e))?,
    )
    .map_err(|e| Error::file(weights, e))
}
