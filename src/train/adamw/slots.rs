//! AdamW's update and the gradients' squared norm on the GPU engine's device (a GPU, or the
//! emulated one in tests): every parameter of a step in one launch (optim.cu's `adamw_slots`),
//! the norm in two, each parameter a slot of a table uploaded a step into memory the optimizer
//! keeps. As tensor ops the update took ~17 launches and as many allocations a parameter; a
//! launch a parameter was still ~200 a step for MiniLM's 101 parameters (update and norm), half
//! the GPU step's budget of 400 (issue 57). The kernels are the GPU engine's source
//! (engine/gpu/kernels/), launched as the engine launches them (`Device::launch`), so the
//! emulated device runs this very code on every CI (slots_test.rs) and a GPU its own tests.
use super::host::Coefficients;
use crate::model::engine::gpu::{Addr, Arg, Buf, Device, Slot};
use candle_core::{DType, Result, Tensor};

/// Blocks a slot's sum of squares is split over (each writes one partial sum).
const PARTIALS: usize = 64;
/// Slots a launch takes at most (the grid's y extent).
const MAX_SLOTS: usize = 65_535;
/// Blocks a slot's update is shared by, at most (256 threads each; a larger parameter's
/// threads take several values in turn).
const UPDATE_BLOCKS: usize = 1024;

/// Device memory kept between steps, grown when a step needs more: a step allocates nothing.
pub struct Table<D: Device> {
    buf: Option<Buf<D, u8>>,
}

impl<D: Device> Default for Table<D> {
    fn default() -> Self {
        Table { buf: None }
    }
}

impl<D: Device> Table<D> {
    /// At least `bytes` of memory on `dev`: its address.
    fn room(&mut self, dev: &D, bytes: usize) -> Result<Addr> {
        if self.buf.as_ref().is_none_or(|b| b.len() < bytes) {
            self.buf = None; // freed before the larger one is allocated
            self.buf = Some(Buf::zeros(dev, bytes)?);
        }
        Ok(self.buf.as_ref().expect("made above").at(0))
    }

    /// `slots` into the table's memory (grown to hold them), in order with the device's work
    /// (the previous step's launches have read the table before it is overwritten): its address.
    fn upload(&mut self, dev: &D, slots: &[Slot], extra: usize) -> Result<Addr> {
        let base = self.room(dev, size_of_val(slots) + extra)?;
        dev.upload(base, Slot::bytes(slots))?;
        Ok(base)
    }
}

/// A parameter's AdamW update: its weight, gradient and moments (f32, contiguous, on the
/// device) and its weight-decay factor.
pub struct Update<'a> {
    pub w: &'a Tensor,
    pub g: &'a Tensor,
    pub m: &'a Tensor,
    pub v: &'a Tensor,
    pub decay: f32,
}

/// The address of an f32 tensor on `dev`, its values contiguous.
fn f32_addr<D: Device>(dev: &D, t: &Tensor) -> Result<Addr> {
    if t.dtype() != DType::F32 {
        candle_core::bail!("adamw: f32 tensors expected, got {:?}", t.dtype())
    }
    dev.tensor_addr(t)
}

/// Every `ps`' w, m, v <- AdamW(w, m, v, g) in place, one launch (per 65,535 parameters), the
/// table in `table`. `c.decay` is not read: each parameter brings its own. m and v are the
/// optimizer's own tensors, never shared (its checkpoint state is a copy), so writing them in
/// place is unseen elsewhere.
pub fn update<D: Device>(
    dev: &D,
    table: &mut Table<D>,
    ps: &[Update],
    c: &Coefficients,
) -> Result<()> {
    if ps.is_empty() {
        return Ok(());
    }
    // contiguous gradients, alive until the launch has been queued
    let gs: Vec<Tensor> = ps.iter().map(|p| p.g.contiguous()).collect::<Result<_>>()?;
    let mut slots = Vec::with_capacity(ps.len());
    for (p, g) in ps.iter().zip(&gs) {
        let n = p.w.elem_count();
        if [g, p.m, p.v].iter().any(|t| t.elem_count() != n) {
            candle_core::bail!("adamw: gradient and moments must have w's {n} values");
        }
        let at = [p.w, g, p.m, p.v].map(|t| f32_addr(dev, t));
        let [w, g, m, v] = at;
        slots.push(Slot::new([w?, g?, m?, v?], n, p.decay));
    }
    let base = table.upload(dev, &slots, 0)?;
    let consts = [c.scale, c.c1, c.b2, c.c2, c.step_size, c.bc2_sqrt, c.eps].map(Arg::F32);
    for (k, chunk) in slots.chunks(MAX_SLOTS).enumerate() {
        let at = base + (k * MAX_SLOTS * size_of::<Slot>()) as Addr;
        let most = chunk.iter().map(|s| s.n as usize).max().unwrap_or(1);
        let blocks = most.div_ceil(256).clamp(1, UPDATE_BLOCKS) as u32;
        let args: Vec<Arg> = std::iter::once(Arg::Addr(at)).chain(consts).collect();
        // the table's slots point into live f32 buffers of n values each (`gs` and `ps` outlive
        // the queued launch's reads in the device's order)
        dev.launch("adamw_slots", (blocks, chunk.len() as u32), 256, &args)?;
    }
    Ok(())
}

/// Sum of squares of f32 tensors on `dev`, summed on the device in a fixed order and read once:
/// two launches (per 65,535 tensors); the table and partial sums in `room`, kept between calls
/// (none allocated once a step's size has been seen).
pub fn sum_squares<D: Device>(dev: &D, room: &mut Table<D>, ts: &[Tensor]) -> Result<f64> {
    let ts: Vec<Tensor> = ts.iter().map(|t| t.contiguous()).collect::<Result<_>>()?;
    let slots = ts
        .iter()
        .map(|t| Ok(Slot::new([0, f32_addr(dev, t)?, 0, 0], t.elem_count(), 1.0)))
        .collect::<Result<Vec<_>>>()?;
    let table = size_of_val(slots.as_slice());
    let partials = slots.len() * PARTIALS;
    let base = room.upload(dev, &slots, 4 * (partials + 1))?;
    let (partial, out) = (base + table as Addr, base + (table + 4 * partials) as Addr);
    for (k, chunk) in slots.chunks(MAX_SLOTS).enumerate() {
        let at = base + (k * MAX_SLOTS * size_of::<Slot>()) as Addr;
        let to = partial + (4 * k * MAX_SLOTS * PARTIALS) as Addr;
        let grid = (PARTIALS as u32, chunk.len() as u32);
        dev.launch(
            "sum_squares_slots",
            grid,
            256,
            &[Arg::Addr(at), Arg::Addr(to)],
        )?;
    }
    let n = Arg::U64(partials as u64);
    dev.launch(
        "sum_all",
        (1, 1),
        256,
        &[Arg::Addr(partial), n, Arg::Addr(out)],
    )?;
    let mut total = [0u8; 4];
    dev.download(out, &mut total)?;
    Ok(f32::from_ne_bytes(total) as f64)
}
