//! Trainable parameters: a VarMap whose variables the model creates by name, filled from a
//! checkpoint where it has them (looking through a missing or extra "bert." prefix), and
//! initialised as BERT does otherwise, from a seeded RNG (candle's init RNG cannot be seeded).
use crate::error::{Error, Result};
use candle_core::{DType, Device, Tensor, Var};
use candle_nn::{VarBuilder, VarMap};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;

use crate::model::folders::weights::read_weights;
use std::path::{Path, PathBuf};

/// Variables sorted by name: a deterministic order for updates and checkpoints.
pub fn vars(varmap: &VarMap) -> Vec<(String, Var)> {
    let data = varmap.data().lock().unwrap();
    let mut v: Vec<(String, Var)> = data.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

/// The variables alone, in the same order as `vars`.
pub fn var_list(varmap: &VarMap) -> Vec<Var> {
    vars(varmap).into_iter().map(|(_, v)| v).collect()
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

/// A model whose weights are variables (trainable), filled from a checkpoint.
pub struct Trainable<M> {
    pub model: M,
    pub varmap: VarMap,
    /// Tensors the checkpoint did not have, initialised fresh (BERT's init, seeded): task heads only.
    pub fresh: Vec<String>,
}

/// The one way training commands load their model: `build` creates the model's variables by
/// name, then every one is filled from `weights` (looking through a missing or extra "bert."
/// prefix) or, by exact name, from one of `extra` (a saved head). A tensor found nowhere may start
/// fresh only under one of `heads` (a classifier, a pooler, a Condenser head); any other missing
/// tensor is an error naming it, so a checkpoint whose names do not fit (every name prefixed, a
/// different architecture) is refused instead of trained from random weights.
/// A LayerNorm's weight or bias under the TF-era names some checkpoints keep (`gamma`, `beta`:
/// BERT's original release, SPLADE-tiny); None for any other tensor.
fn tf_norm_name(name: &str) -> Option<String> {
    let (norm, which) = name.rsplit_once('.')?;
    let tf = match which {
        "weight" => "gamma",
        "bias" => "beta",
        _ => return None,
    };
    norm.ends_with("LayerNorm").then(|| format!("{norm}.{tf}"))
}

pub fn load_trainable<M>(
    weights: &Path,
    extra: &[PathBuf],
    heads: &[&str],
    seed: u64,
    device: &Device,
    build: impl FnOnce(VarBuilder) -> candle_core::Result<M>,
) -> Result<Trainable<M>> {
    let varmap = VarMap::new();
    let model = build(VarBuilder::from_varmap(&varmap, DType::F32, device))
        .map_err(|e| Error::file(weights, e))?;
    let file = read_weights(weights, device)?;
    let extras = extra
        .iter()
        .map(|p| Ok((p.clone(), read_weights(p, device)?)))
        .collect::<Result<Vec<_>>>()?;
    let mut rng = StdRng::seed_from_u64(seed);
    let (mut fresh, mut missing) = (Vec::new(), Vec::new());
    for (name, var) in vars(&varmap) {
        let in_file = [
            name.clone(),
            name.trim_start_matches("bert.").to_string(),
            format!("bert.{name}"),
        ]
        .into_iter()
        .flat_map(|n| [tf_norm_name(&n), Some(n)].into_iter().flatten())
        .find_map(|n| file.get(&n))
        .map(|t| (t, weights));
        let found = in_file.or_else(|| {
            extras
                .iter()
                .find_map(|(p, w)| w.get(&name).map(|t| (t, p.as_path())))
        });
        match found {
            Some((t, from)) => set_checked(&var, t, &name, from)?,
            None if heads.iter().any(|h| name.starts_with(h)) => {
                init_fresh(&var, &name, &mut rng)?;
                fresh.push(name);
            }
            None => missing.push(name),
        }
    }
    if !missing.is_empty() {
        let mut theirs: Vec<&String> = file.keys().collect();
        theirs.sort();
        return Err(Error::file(
            weights,
            format!(
                "the checkpoint lacks {} of the model's tensors (e.g. {}); its tensors are named like {}: \
                 not weights this model can start from",
                missing.len(),
                missing.iter().take(3).cloned().collect::<Vec<_>>().join(", "),
                theirs.iter().take(3).map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
            ),
        ));
    }
    Ok(Trainable {
        model,
        varmap,
        fresh,
    })
}

/// BERT's init: normal(0, 0.02) for matrices; biases and LayerNorm keep their constants.
fn init_fresh(var: &Var, name: &str, rng: &mut StdRng) -> Result<()> {
    if name.ends_with("weight") && !name.contains("LayerNorm") {
        let v: Vec<f32> = (0..var.elem_count()).map(|_| normal(rng) * 0.02).collect();
        var.set(&Tensor::from_vec(v, var.shape(), var.device())?)?;
    }
    Ok(())
}

fn normal(rng: &mut StdRng) -> f32 {
    let (u1, u2): (f64, f64) = (rng.random::<f64>().max(1e-300), rng.random());
    ((-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()) as f32
}

pub use crate::model::folders::save::{save_tensors, Weights};

/// The variables as named tensors (the same storage).
pub fn named(varmap: &VarMap) -> Weights {
    vars(varmap)
        .into_iter()
        .map(|(k, v)| (k, v.as_tensor().clone()))
        .collect()
}

pub fn save_vars(varmap: &VarMap, path: &Path) -> Result<()> {
    save_tensors(&named(varmap), path)
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
