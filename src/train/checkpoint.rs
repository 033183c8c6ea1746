//! Checkpoints: weights, optimizer moments and the loop state (steps taken, best score, log),
//! written to a fresh folder and swapped in by rename, so a kill at any moment leaves the previous
//! checkpoint whole. The data position and dropout masks derive from the step, so they need no
//! saved RNG state.
use super::adamw::AdamW;
use super::params;
use crate::data::write_atomic;
use crate::error::{Error, Result};
use crate::model::folders::weights::read_weights;
use crate::plot::{line_chart, Figure};
use candle_nn::VarMap;
use serde::{Deserialize, Serialize};
use std::fmt::Write;
use std::path::Path;

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct TrainState {
    /// Micro-batches done (the data position).
    pub micro: u64,
    /// Optimizer steps done.
    pub step: u64,
    pub best: Option<(String, f64)>,
    /// (step, loss, lr, eval metric)
    pub log: Vec<(u64, f64, f64, Option<f64>)>,
    /// Names of the loss's parts (TrainTask::loss_parts), and their mean at every logged step:
    /// kept in the checkpoint so a resumed run's log is whole.
    #[serde(default)]
    pub part_names: Vec<String>,
    #[serde(default)]
    pub parts: Vec<Vec<f64>>,
    /// Each logged step's wall time (trainer.rs's clock: its work complete on the device), the
    /// log's last column; a checkpoint of an older condenser has none, and its steps' cells
    /// stay empty.
    #[serde(default)]
    pub step_seconds: Vec<f64>,
    /// The run's settings, which --resume must match.
    #[serde(default)]
    pub settings: Option<super::config::RunSettings>,
    /// f16's dynamic loss scale (None: not scaled), its count of overflow-free steps since it
    /// last changed, and the steps skipped for overflowing gradients: saved so that a resumed
    /// f16 run scales exactly as the uninterrupted one.
    #[serde(default)]
    pub loss_scale: Option<f64>,
    #[serde(default)]
    pub scale_good_steps: u64,
    #[serde(default)]
    pub skipped_steps: u64,
}

pub fn save(dir: &Path, varmap: &VarMap, opt: &AdamW, st: &TrainState) -> Result<()> {
    let tmp = dir.with_extension("tmp");
    let old = dir.with_extension("old");
    let _ = std::fs::remove_dir_all(&tmp);
    let written = (|| -> Result<()> {
        std::fs::create_dir_all(&tmp).map_err(|e| Error::file(&tmp, e))?;
        params::save_vars(varmap, &tmp.join("model.safetensors"))?;
        params::save_tensors(&opt.state()?, &tmp.join("optimizer.safetensors"))?;
        let state = serde_json::json!({"state": st, "optimizer_steps": opt.t});
        write_atomic(
            &tmp.join("state.json"),
            serde_json::to_string(&state).unwrap().as_bytes(),
        )
    })();
    if let Err(e) = written {
        // the last checkpoint stays as it was, and no half-written one lies beside it
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    if dir.exists() {
        let _ = std::fs::remove_dir_all(&old);
        std::fs::rename(dir, &old).map_err(|e| Error::file(dir, e))?;
    }
    std::fs::rename(&tmp, dir).map_err(|e| Error::file(dir, e))?;
    let _ = std::fs::remove_dir_all(&old);
    Ok(())
}

/// `check` sees the saved state before any weight is read: a run with other settings (another
/// set of trained variables, say) is refused for what differs, not for a missing tensor.
pub fn load(
    dir: &Path,
    varmap: &VarMap,
    opt: &mut AdamW,
    check: impl FnOnce(&TrainState) -> Result<()>,
) -> Result<TrainState> {
    // a kill between the two renames of `save` leaves the previous checkpoint as .old
    let dir = if dir.join("state.json").is_file() {
        dir.to_path_buf()
    } else {
        dir.with_extension("old")
    };
    let state_path = dir.join("state.json");
    let text = std::fs::read_to_string(&state_path)
        .map_err(|e| Error::file(&state_path, format!("no checkpoint to resume: {e}")))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| Error::file(&state_path, e))?;
    let st: TrainState =
        serde_json::from_value(v["state"].clone()).map_err(|e| Error::file(&state_path, e))?;
    check(&st)?;
    // read into host memory and moved a tensor at a time: read onto a GPU, the checkpoint's
    // weights and moments (3x the model) sat there beside the live ones, so a resumed run
    // could need more of the GPU than the run it resumes
    let host = candle_core::Device::Cpu;
    let weights = dir.join("model.safetensors");
    let w = read_weights(&weights, &host)?;
    for (name, var) in params::vars(varmap) {
        let t = w
            .get(&name)
            .ok_or_else(|| Error::file(&weights, format!("checkpoint lacks {name}")))?;
        t.to_device(var.device())
            .and_then(|t| var.set(&t))
            .map_err(|e| Error::file(&weights, e))?;
    }
    let ostate = read_weights(&dir.join("optimizer.safetensors"), &host)?;
    opt.load_state(&ostate, v["optimizer_steps"].as_u64().unwrap_or(st.step))
        .map_err(|e| Error::file(&dir, e))?;
    Ok(st)
}

/// train_log.csv and the loss curve (loss.svg, loss.png) in `out`.
pub fn write_log(out: &Path, st: &TrainState) -> Result<()> {
    let mut csv = String::from("step,loss,lr,eval");
    for name in &st.part_names {
        let _ = write!(csv, ",{name}");
    }
    csv.push_str(",seconds\n");
    // steps logged before the checkpoint recorded times (an older condenser's) have none
    let untimed = st.log.len().saturating_sub(st.step_seconds.len());
    for (i, (s, l, lr, m)) in st.log.iter().enumerate() {
        let _ = write!(
            csv,
            "{s},{l},{lr},{}",
            m.map(|v| v.to_string()).unwrap_or_default()
        );
        for v in st.parts.get(i).into_iter().flatten() {
            let _ = write!(csv, ",{v}");
        }
        let t = i.checked_sub(untimed).map(|k| st.step_seconds[k]);
        let _ = writeln!(csv, ",{}", t.map(|t| format!("{t:.6}")).unwrap_or_default());
    }
    write_atomic(&out.join("train_log.csv"), csv.as_bytes())?;
    let pts: Vec<(f64, f64)> = st.log.iter().map(|(s, l, _, _)| (*s as f64, *l)).collect();
    let smooth = running_mean(&pts);
    let mut series = vec![
        ("loss".to_string(), pts),
        ("mean of 20".to_string(), smooth),
    ];
    for (k, name) in st.part_names.iter().enumerate() {
        let part: Vec<(f64, f64)> = st
            .log
            .iter()
            .zip(&st.parts)
            .filter_map(|((s, ..), p)| p.get(k).map(|v| (*s as f64, *v)))
            .collect();
        series.push((format!("{name} mean 20"), running_mean(&part)));
    }
    line_chart("training loss", "optimizer step", &series).save(&out.join("loss"))
}

/// A running mean over 20 points: the trend through batch noise.
fn running_mean(pts: &[(f64, f64)]) -> Vec<(f64, f64)> {
    (0..pts.len())
        .map(|i| {
            let w = &pts[i.saturating_sub(19)..=i];
            (
                pts[i].0,
                w.iter().map(|p| p.1).sum::<f64>() / w.len() as f64,
            )
        })
        .collect()
}
