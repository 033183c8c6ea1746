//! AdamW as torch implements it (decoupled weight decay), with sentence-transformers' grouping:
//! no decay for biases and LayerNorm weights (candle's AdamW decays every parameter). Global-norm
//! gradient clipping as torch.nn.utils.clip_grad_norm_. One formula (host.rs's `adamw_chunk`),
//! three backends in this room: the host kernel, the GPU engine's device (slots.rs: one launch a
//! step on a GPU, the emulated device in tests) and candle's tensor ops elsewhere, written op
//! for op as the host's so that each rounds alike.
pub mod host;
pub mod slots;
#[cfg(test)]
mod slots_test;
#[cfg(test)]
mod tests;

use candle_core::{DType, Result, Tensor, Var};
use host::{sum_squares, Coefficients, HostUpdate};
use rayon::prelude::*;
use std::collections::HashMap;

pub struct Param {
    pub name: String,
    pub var: Var,
    pub decay: bool,
    moments: Moments,
}

/// AdamW's moments: host vectors on the CPU (updated in parallel), f32 tensors beside the
/// weights on a GPU (updated in place by one launch for every parameter on CUDA, slots.rs, else
/// with tensor ops; either way a step copies nothing to the host).
enum Moments {
    Host { m: Vec<f32>, v: Vec<f32> },
    Device { m: Tensor, v: Tensor },
}

pub struct AdamW {
    pub params: Vec<Param>,
    pub weight_decay: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    /// Optimizer steps taken.
    pub t: u64,
    /// the CUDA update's device and table of parameters, kept between steps
    cuda: Option<OnCuda>,
}

/// The CUDA device of an f32 tensor laid out contiguously, else None (the caller then takes
/// the tensor-op route, which is correct for any dtype and layout; a build without CUDA has no
/// CUDA tensor, so its update and norm never reach `OnCuda`).
fn eligible(t: &Tensor) -> Option<candle_core::cuda::CudaDevice> {
    match t.device() {
        candle_core::Device::Cuda(d) if t.dtype() == DType::F32 && t.is_contiguous() => {
            Some(d.clone())
        }
        _ => None,
    }
}

/// The GPU engine's device on a GPU (its launcher: slots.rs runs through it) and the memory
/// the optimizer keeps there between steps.
struct OnCuda {
    id: candle_core::cuda::DeviceId,
    dev: crate::model::engine::gpu::Cuda,
    table: slots::Table<crate::model::engine::gpu::Cuda>,
}

impl OnCuda {
    /// `kept`, made (again) where it is none or another GPU's.
    fn on<'k>(
        kept: &'k mut Option<OnCuda>,
        gpu: &candle_core::cuda::CudaDevice,
    ) -> Result<&'k mut OnCuda> {
        if kept.as_ref().is_none_or(|k| k.id != gpu.id()) {
            *kept = None;
            *kept = Some(OnCuda {
                id: gpu.id(),
                dev: crate::model::engine::gpu::Cuda::new(gpu)?,
                table: Default::default(),
            });
        }
        Ok(kept.as_mut().expect("made above"))
    }
}

/// Run `f` on a CPU f32 tensor's elements without copying them out (a copy elsewhere).
fn with_slice<R>(t: &Tensor, f: impl FnOnce(&[f32]) -> R) -> Result<R> {
    let t = t.contiguous()?;
    let (storage, layout) = t.storage_and_layout();
    if let (candle_core::Storage::Cpu(cpu), Some((a, b))) = (&*storage, layout.contiguous_offsets())
    {
        if let Ok(s) = cpu.as_slice::<f32>() {
            return Ok(f(&s[a..b]));
        }
    }
    drop(storage);
    Ok(f(&t
        .flatten_all()?
        .to_dtype(DType::F32)?
        .to_vec1::<f32>()?))
}

/// Parameters sentence-transformers exempts from weight decay.
pub fn decays(name: &str) -> bool {
    !(name.ends_with("bias") || name.contains("LayerNorm") || name.contains("layer_norm"))
}

impl AdamW {
    /// Moments on the host for CPU variables, beside the variables elsewhere.
    pub fn new(vars: Vec<(String, Var)>, weight_decay: f64) -> AdamW {
        Self::build(vars, weight_decay, false).expect("host moments cannot fail")
    }

    /// Moments as tensors beside the variables whatever the device (the GPU path, on any device).
    pub fn with_tensor_moments(vars: Vec<(String, Var)>, weight_decay: f64) -> Result<AdamW> {
        Self::build(vars, weight_decay, true)
    }

    fn build(vars: Vec<(String, Var)>, weight_decay: f64, tensors: bool) -> Result<AdamW> {
        let params = vars
            .into_iter()
            .map(|(name, var)| {
                let n = var.elem_count();
                let moments = if tensors || !var.device().is_cpu() {
                    let z = || Tensor::zeros(var.shape(), DType::F32, var.device());
                    Moments::Device { m: z()?, v: z()? }
                } else {
                    Moments::Host {
                        m: vec![0.0; n],
                        v: vec![0.0; n],
                    }
                };
                Ok(Param {
                    decay: decays(&name),
                    name,
                    var,
                    moments,
                })
            })
            .collect::<Result<_>>()?;
        Ok(AdamW {
            params,
            weight_decay,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            t: 0,
            cuda: None,
        })
    }

    /// The parameters, in the optimizer's order.
    pub fn vars(&self) -> Vec<Var> {
        self.params.iter().map(|p| p.var.clone()).collect()
    }

    /// The parameters' gradients out of a backward pass, detached, in the optimizer's order.
    pub fn gradients(&self, store: candle_core::backprop::GradStore) -> Vec<Option<Tensor>> {
        let vars = self.vars();
        crate::train::ParamGrads::from_store(&vars, store).in_order(&vars)
    }

    /// Global L2 norm of gradients (f32 squares in 16 lanes per 4,096-element chunk, chunks
    /// summed in f64; on a GPU each tensor's sum of squares in f32 there, summed there too).
    pub fn grad_norm(grads: &[Option<Tensor>]) -> Result<f64> {
        let mut sq = 0f64;
        // on a GPU the squares are summed there and read back once: a read per tensor waited on
        // the device ~100 times a step
        let mut on_device = Vec::new();
        for g in grads.iter().flatten() {
            if !g.device().is_cpu() {
                on_device.push(g.clone());
                continue;
            }
            sq += with_slice(g, |v| {
                v.par_chunks(1 << 12)
                    .map(|c| sum_squares(c) as f64)
                    .sum::<f64>()
            })?;
        }
        if let Some(gpu) = on_device.first().and_then(eligible) {
            if on_device.iter().all(|g| eligible(g).is_some()) {
                // the norm's device and memory, kept between steps (the trainer asks for a norm
                // every step, on one GPU)
                static KEPT: std::sync::Mutex<Option<OnCuda>> = std::sync::Mutex::new(None);
                let mut kept = KEPT.lock().unwrap_or_else(|e| e.into_inner());
                let on = OnCuda::on(&mut kept, &gpu)?;
                sq += slots::sum_squares(&on.dev, &mut on.table, &on_device)?;
                return Ok(sq.sqrt());
            }
        }
        if !on_device.is_empty() {
            let squares = on_device
                .iter()
                .map(|g| g.to_dtype(DType::F32)?.sqr()?.sum_all())
                .collect::<Result<Vec<_>>>()?;
            sq += Tensor::stack(&squares, 0)?.sum_all()?.to_scalar::<f32>()? as f64;
        }
        Ok(sq.sqrt())
    }

    /// One update with learning rate `lr`, gradients scaled by `scale` first (accumulation and
    /// clipping). Parameters without a gradient are left alone.
    pub fn step(&mut self, grads: &[Option<Tensor>], lr: f64, scale: f64) -> Result<()> {
        self.t += 1;
        let (b1, b2) = (self.beta1, self.beta2);
        let bc1 = 1.0 - b1.powi(self.t as i32);
        let bc2 = 1.0 - b2.powi(self.t as i32);
        let (eps, wd) = (self.eps, self.weight_decay);
        if grads.len() != self.params.len() {
            candle_core::bail!(
                "adamw: {} gradients for {} parameters",
                grads.len(),
                self.params.len()
            );
        }
        let base = Coefficients {
            scale: scale as f32,
            c1: (1.0 - b1) as f32,
            b2: b2 as f32,
            c2: (1.0 - b2) as f32,
            decay: 1.0,
            step_size: (lr / bc1) as f32,
            bc2_sqrt: bc2.sqrt() as f32,
            eps: eps as f32,
        };
        // CUDA parameters (their index and decay), updated together after the loop
        let mut on_gpu: Vec<(usize, f32)> = Vec::new();
        for (k, (p, g)) in self.params.iter_mut().zip(grads).enumerate() {
            let Some(g) = g else { continue };
            if g.elem_count() != p.var.elem_count() {
                candle_core::bail!(
                    "adamw: {}'s gradient has {} values, the parameter {}",
                    p.name,
                    g.elem_count(),
                    p.var.elem_count()
                );
            }
            let decay = if p.decay { 1.0 - lr * wd } else { 1.0 };
            let c = Coefficients {
                decay: decay as f32,
                ..base
            };
            let (m, v) = match &mut p.moments {
                Moments::Host { m, v } => (m, v),
                Moments::Device { .. } if eligible(p.var.as_tensor()).is_some() => {
                    on_gpu.push((k, decay as f32));
                    continue;
                }
                Moments::Device { m, v } => {
                    tensor_update(p.var.as_tensor(), g, (m, v), &c)
                        .and_then(|w| p.var.set(&w.to_dtype(p.var.dtype())?))?;
                    continue;
                }
            };
            with_slice(g, |g| {
                p.var.as_tensor().inplace_op1(&HostUpdate {
                    g,
                    moments: std::cell::RefCell::new((m, v)),
                    c,
                })
            })??;
        }
        if let Some(&(first, _)) = on_gpu.first() {
            use slots::{update, Update};
            let ups = on_gpu
                .iter()
                .map(|&(k, decay)| {
                    let (p, g) = (&self.params[k], grads[k].as_ref());
                    let (Moments::Device { m, v }, Some(g)) = (&p.moments, g) else {
                        unreachable!("on_gpu holds CUDA parameters with a gradient")
                    };
                    let w = p.var.as_tensor();
                    if !w.device().same_device(self.params[first].var.device()) {
                        candle_core::bail!("adamw: parameters on two CUDA devices ({})", p.name)
                    }
                    Ok(Update { w, g, m, v, decay })
                })
                .collect::<Result<Vec<_>>>()?;
            let gpu = eligible(ups[0].w).expect("on_gpu holds CUDA parameters");
            let on = OnCuda::on(&mut self.cuda, &gpu)?;
            update(&on.dev, &mut on.table, &ups, &base)?;
        }
        Ok(())
    }

    /// Moments by parameter name (`<name>.m`, `<name>.v`), for checkpoints: the device's moments
    /// as views, not copies, so read them before the next step (a CUDA update writes them in
    /// place: slots.rs); checkpoint::save writes them at once, a tensor at a time. (Copied
    /// on the GPU, a checkpoint's moments doubled the optimizer's memory there at every save:
    /// 174 MiB above the training's own for MiniLM, the peak of a cross-encoder run on an H200.)
    pub fn state(&self) -> Result<HashMap<String, Tensor>> {
        let mut out = HashMap::new();
        for p in &self.params {
            let (m, v) = match &p.moments {
                Moments::Host { m, v } => {
                    let host = candle_core::Device::Cpu;
                    (
                        Tensor::from_slice(m, m.len(), &host)?,
                        Tensor::from_slice(v, v.len(), &host)?,
                    )
                }
                Moments::Device { m, v } => (m.flatten_all()?, v.flatten_all()?),
            };
            out.insert(format!("{}.m", p.name), m);
            out.insert(format!("{}.v", p.name), v);
        }
        Ok(out)
    }

    pub fn load_state(&mut self, state: &HashMap<String, Tensor>, t: u64) -> Result<()> {
        for p in &mut self.params {
            let get = |k: String| {
                state
                    .get(&k)
                    .ok_or_else(|| candle_core::Error::Msg(format!("optimizer state lacks {k}")))
            };
            let (m, v) = (get(format!("{}.m", p.name))?, get(format!("{}.v", p.name))?);
            // a state of another model (or a damaged one) never half-fits this one
            for (what, t) in [("m", m), ("v", v)] {
                if t.elem_count() != p.var.elem_count() {
                    candle_core::bail!(
                        "optimizer state {}.{what} has {} values, the parameter {}: a checkpoint \
                         of another model",
                        p.name,
                        t.elem_count(),
                        p.var.elem_count()
                    );
                }
            }
            match &mut p.moments {
                Moments::Host { m: hm, v: hv } => {
                    *hm = m.to_vec1()?;
                    *hv = v.to_vec1()?;
                }
                Moments::Device { m: dm, v: dv } => {
                    let place = |t: &Tensor| {
                        t.to_dtype(DType::F32)?
                            .to_device(p.var.device())?
                            .reshape(p.var.shape())?
                            .copy()
                    };
                    *dm = place(m)?;
                    *dv = place(v)?;
                }
            }
        }
        self.t = t;
        Ok(())
    }
}

/// AdamW with candle's tensor ops (a parameter neither on the host nor the CUDA kernel's): the
/// host kernel's formula op for op (host.rs's `adamw_chunk`), each constant the same f32, so it
/// rounds alike; a division is a tensor division (`Tensor / f64` multiplies by the inverse).
/// m and v are updated; the new weights are returned, in f32.
fn tensor_update(
    w: &Tensor,
    g: &Tensor,
    (m, v): (&mut Tensor, &mut Tensor),
    c: &Coefficients,
) -> Result<Tensor> {
    let f = |x: f32| x as f64; // exact: candle takes the constant back to the same f32
    let g = g
        .to_dtype(DType::F32)?
        .reshape(m.shape())?
        .affine(f(c.scale), 0.0)?;
    *m = (&*m + (&g - &*m)?.affine(f(c.c1), 0.0)?)?;
    *v = (v.affine(f(c.b2), 0.0)? + (&g * &g)?.affine(f(c.c2), 0.0)?)?;
    let at = |x: f32| Tensor::new(x, m.device());
    let denom = v
        .sqrt()?
        .broadcast_div(&at(c.bc2_sqrt)?)?
        .affine(1.0, f(c.eps))?;
    let step = (m.affine(f(c.step_size), 0.0)? / denom)?;
    w.to_dtype(DType::F32)?.affine(f(c.decay), 0.0)? - step
}
