//! The GPU engine's products: a layer's Linears on f32 operands or (--precision bf16) on bf16
//! ones (cuBLAS's GEMM either way, f32 C and sums), as the CPU engine's bf16 training runs its
//! Linears, and the weights' bf16 copies the stack makes each forward.
use super::buffers::{Bf16Weights, Dims, LayerParams, Scratch, THREADS};
use super::device::{Addr, Arg, Buf, Device, Op, Operands};
use crate::model::engine::weights::layer_tensors;
use crate::model::Bert;
use candle_core::{bail, Result};

/// y (n bf16 bits) = x (n f32 values) rounded to nearest even, then zeros up to `padded`
/// values: one launch.
pub(super) fn to_bf16<D: Device>(
    dev: &D,
    x: Addr,
    (n, padded): (usize, usize),
    y: Addr,
) -> Result<()> {
    let (Ok(count), Ok(all)) = (i32::try_from(n), i32::try_from(padded.max(n))) else {
        bail!("gpu engine: {padded} values past a kernel's i32 count")
    };
    let blocks = (all as u32).div_ceil(THREADS).clamp(1, 4096);
    let args = [Arg::Addr(x), Arg::Addr(y), Arg::I32(count), Arg::I32(all)];
    dev.launch("to_bf16", (blocks, 1), THREADS, &args)
}

/// The rows a bf16 product runs on for `t` rows: t rounded up to a multiple of 64 or of an
/// eighth of t's power of two, whichever is larger (at most 1/8 more rows), the added rows'
/// operands zeros. cuBLAS chooses a bf16 GEMM's kernel afresh for each new shape, which on an
/// H200 cost a batch of new token counts more than its products (bf16 encode and training
/// ran at half f32's rate, 2026-11-29); buckets make the shapes repeat. f32 products keep t.
pub(super) fn padded_rows(t: usize) -> usize {
    let q = (t.next_power_of_two() / 8).max(64);
    t.div_ceil(q) * q
}

/// A layer's products: on f32 operands, or (--precision bf16, `LayerParams::bf16`) on bf16
/// ones, as the CPU engine's bf16 training runs its Linears (attention stays f32 in both): the
/// weights' copies made by the stack each forward, an input's or an output gradient's made
/// here, into the scratch's rooms, just before its product (one launch each).
pub(super) struct Gemms<'a, D: Device> {
    dev: &'a D,
    /// the rooms for an input's and an output gradient's bf16 copies (bf16 only)
    rooms: Option<(Addr, Addr)>,
    /// the rows every buffer has room for (a bf16 product's padded rows must fit)
    capacity: usize,
}

/// A product's weight (out x inp): the f32 values, and their bf16 copy where the products
/// run in bf16.
pub(super) type Weight = (Addr, Option<Addr>);

impl<'a, D: Device> Gemms<'a, D> {
    pub(super) fn new(dev: &'a D, p: &LayerParams, s: &Scratch<D>) -> Result<Gemms<'a, D>> {
        let rooms = s.bf16_rooms();
        if p.bf16.is_some() && rooms.is_none() {
            bail!("gpu engine: bf16 weights, but a scratch without room for bf16 operands")
        }
        Ok(Gemms {
            dev,
            rooms: p.bf16.and(rooms),
            capacity: s.rows,
        })
    }

    /// The rows the products of a batch of `t` rows run on: t in f32, `padded_rows(t)` in bf16
    /// (within the buffers' capacity, which the stack sizes for it).
    fn rows(&self, t: usize) -> Result<usize> {
        if self.rooms.is_none() {
            return Ok(t);
        }
        let tp = padded_rows(t);
        if tp > self.capacity {
            bail!(
                "gpu engine: {tp} padded rows past the buffers' {}",
                self.capacity
            )
        }
        Ok(tp)
    }

    /// `x` (`rows` of `width` values, t of them real) as bf16 bits in `room`, the padded rows
    /// zeros (one launch): its address there.
    fn to_bf16(&self, x: Addr, (t, tp): (usize, usize), width: usize, room: Addr) -> Result<Addr> {
        to_bf16(self.dev, x, (t * width, tp * width), room)?;
        Ok(room)
    }

    /// The input `x` (t rows of `width`) and the weight `w` as the product takes them: as they
    /// are (f32), or bf16 (x's copy made in `room` on the padded rows, w's made by the stack).
    fn operands(
        &self,
        x: Addr,
        (t, tp): (usize, usize),
        width: usize,
        room: Addr,
        w: Weight,
    ) -> Result<(Operands, Addr, Addr)> {
        match (self.rooms, w.1) {
            (None, _) => Ok((Operands::F32, x, w.0)),
            (Some(_), Some(wb)) => Ok((Operands::Bf16, self.to_bf16(x, (t, tp), width, room)?, wb)),
            (Some(_), None) => bail!("gpu engine: a bf16 product without the weight's bf16 copy"),
        }
    }

    /// y (t x out) = x (t x inp) W^T, W (out x inp).
    pub(super) fn product(
        &self,
        x: Addr,
        w: Weight,
        (t, out, inp): (usize, usize, usize),
        y: Addr,
    ) -> Result<()> {
        let room = self.rooms.map_or(0, |r| r.0);
        let tp = self.rows(t)?;
        let (ty, x, w) = self.operands(x, (t, tp), inp, room, w)?;
        // (bf16: y's padded rows are written too, zeros: every buffer has room for them)
        self.dev.gemm(
            ty,
            (Op::N, Op::T),
            (tp, out, inp),
            (x, inp),
            (w, inp),
            0.0,
            (y, out),
        )
    }

    /// The backward of y = x W^T: dW (out x inp) += dy^T x, and dx (t x inp) = dy W, added to
    /// dx's values when `add` (dy converted once for both in bf16).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn backward(
        &self,
        dy: Addr,
        x: Addr,
        w: Weight,
        (t, out, inp): (usize, usize, usize),
        dw: Addr,
        dx: Addr,
        add: bool,
    ) -> Result<()> {
        let (rx, rdy) = self.rooms.unwrap_or((0, 0));
        let tp = self.rows(t)?;
        let (ty, dy, w) = self.operands(dy, (t, tp), out, rdy, w)?;
        let x = match ty {
            Operands::F32 => x,
            Operands::Bf16 => self.to_bf16(x, (t, tp), inp, rx)?,
        };
        let dev = self.dev;
        // (bf16: the padded rows of dy and x are zeros, so they add nothing to dW)
        dev.gemm(
            ty,
            (Op::T, Op::N),
            (out, inp, tp),
            (dy, out),
            (x, inp),
            1.0,
            (dw, inp),
        )?;
        let beta = if add { 1.0 } else { 0.0 };
        dev.gemm(
            ty,
            (Op::N, Op::N),
            (tp, inp, out),
            (dy, out),
            (w, inp),
            beta,
            (dx, inp),
        )
    }
}

/// Each layer's four product weights as bf16 bits (qkv's 3h x h, o's h x h, the intermediate's
/// i x h, the output's h x i), made at the first bf16 forward and rounded each forward from the
/// model's current weights (the optimizer changes them between steps).
pub(super) struct RoundedWeights<D: Device> {
    bufs: Vec<Buf<D, u16>>,
    dims: Dims,
}

impl<D: Device> RoundedWeights<D> {
    pub(super) fn new(dev: &D, layers: usize, dims: Dims) -> Result<RoundedWeights<D>> {
        let (h, i) = (dims.hidden, dims.intermediate);
        let bufs = (0..layers)
            .map(|_| Buf::zeros(dev, 4 * h * h + 2 * i * h))
            .collect::<Result<_>>()?;
        Ok(RoundedWeights { bufs, dims })
    }

    /// Round `bert`'s product weights, q, k and v from `qkv` (the forward's copy, per layer):
    /// four launches a layer.
    pub(super) fn round(&self, dev: &D, bert: &Bert, qkv: &[Buf<D, f32>]) -> Result<()> {
        for (l, layer) in bert.layers.iter().enumerate() {
            let ts = layer_tensors(layer)?;
            let b = self.of(l);
            let (h, i) = (self.dims.hidden, self.dims.intermediate);
            let from = [
                (qkv[l].at(0), 3 * h * h, b.wqkv),
                (dev.tensor_addr(ts[6])?, h * h, b.wo),
                (dev.tensor_addr(ts[10])?, i * h, b.wi),
                (dev.tensor_addr(ts[12])?, h * i, b.wd),
            ];
            for (x, n, y) in from {
                to_bf16(dev, x, (n, n), y)?;
            }
        }
        Ok(())
    }

    /// Layer l's rounded weights.
    pub(super) fn of(&self, l: usize) -> Bf16Weights {
        let (h, i) = (self.dims.hidden, self.dims.intermediate);
        let b = &self.bufs[l];
        Bf16Weights {
            wqkv: b.at(0),
            wo: b.at(3 * h * h),
            wi: b.at(4 * h * h),
            wd: b.at(4 * h * h + i * h),
        }
    }
}
