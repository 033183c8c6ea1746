//! AdamW's update and the gradients' squared norm on a CUDA device: every parameter of a step in
//! one launch (optim.cu's `adamw_slots`), the norm in two, each parameter a slot of a table
//! uploaded a step into memory the optimizer keeps. As tensor ops the update took ~17 launches
//! and as many allocations a parameter; a launch a parameter was still ~200 a step for MiniLM's
//! 101 parameters (update and norm), half the GPU step's budget of 400 (issue 57). The kernels
//! are the GPU engine's source (kernels/cuda/engine/), compiled by NVRTC once a process, and
//! tested on the CPU by emulation (adamw_slots_test.rs) as well as on a card (below).
use super::adamw_host::Coefficients;
use crate::model::kernels::cuda::{engine_ptx, f32_address, Slot, ENGINE_MODULE};
use candle_core::cuda::cudarc::driver::{
    result as driver, CudaFunction, CudaSlice, DevicePtr, LaunchConfig, PushKernelArg,
};
use candle_core::cuda::{CudaDevice, WrapErr};
use candle_core::{DType, Device, Result, Tensor};

/// Blocks a slot's sum of squares is split over (each writes one partial sum).
const PARTIALS: usize = 64;
/// Slots a launch takes at most (the grid's y extent).
const MAX_SLOTS: usize = 65_535;
/// Blocks a slot's update is shared by, at most (256 threads each; a larger parameter's
/// threads take several values in turn).
const UPDATE_BLOCKS: usize = 1024;

fn function(dev: &CudaDevice, name: &str) -> Result<CudaFunction> {
    Ok(dev
        .get_or_load_custom_func(name, ENGINE_MODULE, engine_ptx()?)?
        .into_cuda_function())
}

/// The CUDA device of an f32 tensor laid out contiguously, else None (the caller then takes
/// the tensor-op route, which is correct for any dtype and layout).
pub fn eligible(t: &Tensor) -> Option<CudaDevice> {
    match t.device() {
        Device::Cuda(d) if t.dtype() == DType::F32 && t.is_contiguous() => Some(d.clone()),
        _ => None,
    }
}

/// The device address of a contiguous f32 tensor's first element on `dev`'s stream.
fn address(t: &Tensor, dev: &CudaDevice) -> Result<u64> {
    f32_address(t, &dev.cuda_stream())
}

/// A launch of 256-thread blocks on an (x, y) grid (the kernels' block_sum_256 width).
fn blocks_256(x: u32, y: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (x, y, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Device memory kept between steps, grown when a step needs more: a step allocates nothing.
#[derive(Default)]
pub struct Table {
    buf: Option<CudaSlice<u8>>,
}

impl Table {
    /// At least `bytes` of device memory on `dev`: its address.
    fn room(&mut self, dev: &CudaDevice, bytes: usize) -> Result<u64> {
        if self.buf.as_ref().is_none_or(|b| b.len() < bytes) {
            self.buf = None; // freed before the larger one is allocated
            self.buf = Some(dev.cuda_stream().alloc_zeros::<u8>(bytes).w()?);
        }
        let stream = dev.cuda_stream();
        let (ptr, _sync) = self.buf.as_ref().expect("made above").device_ptr(&stream);
        Ok(ptr)
    }
}

/// `slots` into device memory at `at`, in order with the stream's work (the previous step's
/// launches have read the table before it is overwritten).
fn upload(dev: &CudaDevice, at: u64, slots: &[Slot]) -> Result<()> {
    let stream = dev.cuda_stream();
    // SAFETY: `at` spans the table's bytes (Table::room); from pageable memory the call returns
    // once the bytes are staged, so `slots` may go
    unsafe { driver::memcpy_htod_async(at, Slot::bytes(slots), stream.cu_stream()) }.w()
}

/// A parameter's AdamW update: its weight, gradient and moments (f32, contiguous, on one CUDA
/// device) and its weight-decay factor.
pub struct Update<'a> {
    pub w: &'a Tensor,
    pub g: &'a Tensor,
    pub m: &'a Tensor,
    pub v: &'a Tensor,
    pub decay: f32,
}

/// Every `ps`' w, m, v <- AdamW(w, m, v, g) in place, one launch (per 65,535 parameters), the
/// table in `table`. `c.decay` is not read: each parameter brings its own. m and v are the
/// optimizer's own tensors, never shared (its checkpoint state is a copy), so writing them in
/// place is unseen elsewhere.
pub fn update(dev: &CudaDevice, table: &mut Table, ps: &[Update], c: &Coefficients) -> Result<()> {
    if ps.is_empty() {
        return Ok(());
    }
    // contiguous gradients, alive until the launch has been queued
    let gs: Vec<Tensor> = ps.iter().map(|p| p.g.contiguous()).collect::<Result<_>>()?;
    let mut slots = Vec::with_capacity(ps.len());
    for (p, g) in ps.iter().zip(&gs) {
        let n = p.w.elem_count();
        for t in [g, p.m, p.v] {
            if eligible(t).is_none() || t.elem_count() != n {
                candle_core::bail!("adamw: gradient and moments must be contiguous f32 beside w");
            }
        }
        let at = [p.w, g, p.m, p.v].map(|t| address(t, dev));
        let [w, g, m, v] = at;
        slots.push(Slot::new([w?, g?, m?, v?], n, p.decay));
    }
    let base = table.room(dev, size_of_val(slots.as_slice()))?;
    upload(dev, base, &slots)?;
    let f = function(dev, "adamw_slots")?;
    let stream = dev.cuda_stream();
    for (k, chunk) in slots.chunks(MAX_SLOTS).enumerate() {
        let at = base + (k * MAX_SLOTS * size_of::<Slot>()) as u64;
        let most = chunk.iter().map(|s| s.n as usize).max().unwrap_or(1);
        let blocks = most.div_ceil(256).clamp(1, UPDATE_BLOCKS) as u32;
        let mut b = stream.launch_builder(&f);
        b.arg(&at);
        let consts = [c.scale, c.c1, c.b2, c.c2, c.step_size, c.bc2_sqrt, c.eps];
        for k in &consts {
            b.arg(k);
        }
        let cfg = blocks_256(blocks, chunk.len() as u32);
        // SAFETY: the table's slots point into live f32 buffers of n values each on this
        // device's stream (`gs` and `ps` outlive the queued launch's reads in stream order)
        unsafe { b.launch(cfg) }.w()?;
    }
    Ok(())
}

/// The norm's table and partial sums, kept between steps (the trainer asks for a norm every
/// step, on one card): the memory of the last device asked for, made again for another.
static NORM_ROOM: std::sync::Mutex<Option<(candle_core::cuda::DeviceId, Table)>> =
    std::sync::Mutex::new(None);

/// Sum of squares of f32 CUDA tensors, summed on the device in a fixed order and read once:
/// two launches (per 65,535 tensors); the table and partial sums in memory kept between calls
/// (none allocated once a step's size has been seen).
pub fn sum_squares(ts: &[Tensor], dev: &CudaDevice) -> Result<f64> {
    let ts: Vec<Tensor> = ts.iter().map(|t| t.contiguous()).collect::<Result<_>>()?;
    let slots = ts
        .iter()
        .map(|t| Ok(Slot::new([0, address(t, dev)?, 0, 0], t.elem_count(), 1.0)))
        .collect::<Result<Vec<_>>>()?;
    let stream = dev.cuda_stream();
    let table = size_of_val(slots.as_slice());
    let partials = slots.len() * PARTIALS;
    // held to the end: the launches read the room, and the result is read from it
    let mut kept = NORM_ROOM.lock().unwrap_or_else(|e| e.into_inner());
    if kept.as_ref().is_none_or(|(id, _)| *id != dev.id()) {
        *kept = Some((dev.id(), Table::default()));
    }
    let room = &mut kept.as_mut().expect("made above").1;
    let base = room.room(dev, table + 4 * (partials + 1))?;
    upload(dev, base, &slots)?;
    let (partial, out) = (base + table as u64, base + (table + 4 * partials) as u64);
    let squares = function(dev, "sum_squares_slots")?;
    for (k, chunk) in slots.chunks(MAX_SLOTS).enumerate() {
        let at = base + (k * MAX_SLOTS * size_of::<Slot>()) as u64;
        let to = partial + (4 * k * MAX_SLOTS * PARTIALS) as u64;
        let mut b = stream.launch_builder(&squares);
        b.arg(&at);
        b.arg(&to);
        let cfg = blocks_256(PARTIALS as u32, chunk.len() as u32);
        // SAFETY: the slots point into live f32 tensors (`ts`), the partials span
        // slots x PARTIALS floats of `room`, on this stream
        unsafe { b.launch(cfg) }.w()?;
    }
    let all = function(dev, "sum_all")?;
    let n = partials as u64;
    let mut b = stream.launch_builder(&all);
    b.arg(&partial);
    b.arg(&n);
    b.arg(&out);
    let cfg = blocks_256(1, 1);
    // SAFETY: n partial sums and one output float inside `room`, on this stream
    unsafe { b.launch(cfg) }.w()?;
    let mut total = [0f32];
    // SAFETY: `out` is a live float of `room`; the stream is synchronised before it is read
    unsafe { driver::memcpy_dtoh_async(&mut total, out, stream.cu_stream()) }.w()?;
    stream.synchronize().w()?;
    Ok(total[0] as f64)
}

#[cfg(test)]
mod tests {
    use crate::train::AdamW;
    use candle_core::{Device, Tensor, Var};

    /// Sums of squares whose values are exact in f32: 1..n ones (several blocks, ragged tails),
    /// two tensors at once, and 1 + 4 + 9.
    #[test]
    fn sum_squares_of_known_values() {
        let Ok(gpu) = Device::new_cuda(0) else {
            crate::runtime::skipped("a CUDA kernel", "gpu", "no CUDA device on this machine");
            return;
        };
        let dev =
            super::eligible(&Tensor::zeros(1, candle_core::DType::F32, &gpu).unwrap()).unwrap();
        for n in [1usize, 3, 256, 257, 16384, 16385, 70001] {
            let ones = Tensor::ones(n, candle_core::DType::F32, &gpu).unwrap();
            let r = super::sum_squares(std::slice::from_ref(&ones), &dev).unwrap();
            let r2 = super::sum_squares(&[ones.clone(), ones], &dev).unwrap();
            assert_eq!(
                (r, r2),
                (n as f64, 2.0 * n as f64),
                "sum of squares of ones({n})"
            );
        }
        let t = Tensor::new(&[1f32, 2., 3.], &gpu).unwrap();
        assert_eq!(super::sum_squares(&[t], &dev).unwrap(), 14.0);
    }

    /// The one-launch update and norm against the CPU's (host kernel) on the same values, three
    /// steps with clipping-like scales and weight decay; skipped where no CUDA device answers.
    #[test]
    fn one_launch_update_matches_the_cpu() {
        let Ok(gpu) = Device::new_cuda(0) else {
            crate::runtime::skipped("a CUDA kernel", "gpu", "no CUDA device on this machine");
            return;
        };
        let cpu = Device::Cpu;
        let n = 70_001; // several blocks and a ragged tail
        let w0: Vec<f32> = (0..n)
            .map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0)
            .collect();
        let make = |d: &Device| {
            let w = Var::from_slice(&w0, n, d).unwrap();
            let b = Var::from_slice(&w0[..384], 384, d).unwrap();
            vec![("l.weight".to_string(), w), ("l.bias".to_string(), b)]
        };
        // tensor moments on the GPU (the one-launch route), host moments on the CPU
        let mut on_gpu = AdamW::with_tensor_moments(make(&gpu), 0.01).unwrap();
        let mut on_cpu = AdamW::new(make(&cpu), 0.01);
        for step in 0..3 {
            let g: Vec<f32> = (0..n)
                .map(|i| (((i + 31 * step) * 104_729) % 2001) as f32 / 1000.0 - 1.0)
                .collect();
            let grads = |d: &Device| {
                vec![
                    Some(Tensor::from_slice(&g, n, d).unwrap()),
                    Some(Tensor::from_slice(&g[..384], 384, d).unwrap()),
                ]
            };
            let (gg, gc) = (grads(&gpu), grads(&cpu));
            let (ng, nc) = (
                AdamW::grad_norm(&gg).unwrap(),
                AdamW::grad_norm(&gc).unwrap(),
            );
            let again = AdamW::grad_norm(&gg).unwrap();
            eprintln!("step {step}: norm {ng} on the GPU (again {again}), {nc} on the CPU");
            assert!(
                (ng - nc).abs() <= 1e-5 * nc,
                "norm {ng} on the GPU, {nc} on the CPU"
            );
            assert_eq!(ng, again, "the GPU norm is not repeatable");
            let scale = 0.5 / (step + 1) as f64;
            on_gpu.step(&gg, 1e-2, scale).unwrap();
            on_cpu.step(&gc, 1e-2, scale).unwrap();
        }
        for (a, b) in on_gpu.vars().iter().zip(on_cpu.vars()) {
            let a = a
                .as_tensor()
                .to_device(&cpu)
                .unwrap()
                .to_vec1::<f32>()
                .unwrap();
            let b = b.as_tensor().to_vec1::<f32>().unwrap();
            let worst = a
                .iter()
                .zip(&b)
                .map(|(x, y)| (x - y).abs())
                .fold(0f32, f32::max);
            eprintln!(
                "weights: worst difference {worst:e}; first {:?} vs {:?}",
                &a[..3],
                &b[..3]
            );
            assert!(worst <= 1e-6, "weights differ by {worst} after 3 steps");
        }
    }
}
