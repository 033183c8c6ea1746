//! Weight-space interpolation of two models of one architecture (WiSE-FT, Wortsman et al. 2022):
//! theta = (1 - alpha) theta_start + alpha theta_end, tensor by tensor. A fine-tuned model
//! interpolated with its start keeps part of what fine-tuning gained while staying near the
//! start's behaviour elsewhere; alpha 0 is the start, 1 the fine-tuned model.
use super::save::save_tensors;
use super::weights::read_weights;
use crate::error::{Error, Result};
use candle_core::Device;
use std::path::Path;

type Weights = std::collections::HashMap<String, candle_core::Tensor>;

/// The weights file of a model folder (a sentence-transformers folder keeps it at the root, as
/// condenser writes it).
fn weights_of(dir: &Path) -> Result<std::path::PathBuf> {
    let p = dir.join("model.safetensors");
    match p.is_file() {
        true => Ok(p),
        false => Err(Error::file(
            dir,
            "no model.safetensors: not a model folder condenser wrote",
        )),
    }
}

/// Write `out`: `end`'s folder (configuration, tokenizer, pooling) with weights interpolated
/// between `start`'s and `end`'s by `alpha`. The two must hold the same tensors, shape for shape.
pub fn interpolate(start: &Path, end: &Path, alpha: f64, out: &Path) -> Result<usize> {
    if !(0.0..=1.0).contains(&alpha) {
        return Err(Error::msg(format!("--alpha {alpha}: must lie in [0, 1]")));
    }
    let (sp, ep) = (weights_of(start)?, weights_of(end)?);
    let (a, b) = (
        read_weights(&sp, &Device::Cpu)?,
        read_weights(&ep, &Device::Cpu)?,
    );
    // integer tensors are buffers (HF's `position_ids`), not weights: never mixed, and one that
    // only the start has is left out, as condenser's own saves leave it
    let weight = |t: &candle_core::Tensor| t.dtype().is_float();
    let only = |x: &Weights, y: &Weights| {
        (x.iter())
            .find(|(k, t)| weight(t) && !y.contains_key(*k))
            .map(|(k, _)| k.clone())
    };
    if let Some(k) = only(&b, &a).or_else(|| only(&a, &b)) {
        return Err(Error::file(
            &ep,
            format!("tensor {k} is in one model only: not the same architecture"),
        ));
    }
    let mut mixed = std::collections::HashMap::with_capacity(b.len());
    for (name, tb) in &b {
        let Some(ta) = a.get(name).filter(|_| weight(tb)) else {
            mixed.insert(name.clone(), tb.clone());
            continue;
        };
        if ta.dims() != tb.dims() || ta.dtype() != tb.dtype() {
            return Err(Error::file(
                &ep,
                format!(
                    "{name} is {:?} {:?} here, {:?} {:?} in {}",
                    tb.dtype(),
                    tb.dims(),
                    ta.dtype(),
                    ta.dims(),
                    sp.display()
                ),
            ));
        }
        let m = (ta.affine(1.0 - alpha, 0.0)? + tb.affine(alpha, 0.0)?)?;
        mixed.insert(name.clone(), m);
    }
    copy_folder(end, out)?;
    save_tensors(&mixed, &out.join("model.safetensors"))?;
    Ok(mixed.len())
}

/// What a training run leaves beside its model (the trainer's checkpoint with its optimizer
/// moments, its log and loss curve, pre-training's block cache and head): the end's run, not
/// the interpolated model's, so never copied into it.
fn run_file(name: &std::ffi::OsStr) -> bool {
    let name = name.to_string_lossy();
    [
        "checkpoint",
        "train_log.csv",
        "loss.svg",
        "loss.png",
        "condenser_head.safetensors",
        // the end's model card describes the end's run; the mixed model gets its own
        "README.md",
    ]
    .contains(&name.as_ref())
        || name.ends_with(".u32")
}

/// Every file of `from` (sub-folders included) copied into `to`, but its weights and its run's
/// files.
fn copy_folder(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).map_err(|e| Error::file(to, e))?;
    for e in std::fs::read_dir(from).map_err(|e| Error::file(from, e))? {
        let p = e.map_err(|e| Error::file(from, e))?.path();
        let name = p.file_name().expect("a directory entry");
        if run_file(name) {
            continue;
        }
        if p.is_dir() {
            copy_folder(&p, &to.join(name))?;
        } else if name != "model.safetensors" {
            let bytes = std::fs::read(&p).map_err(|e| Error::file(&p, e))?;
            crate::data::write_atomic(&to.join(name), &bytes)?;
        }
    }
    Ok(())
}
