//! The buffers a layer's forward and backward run on (layer.rs): where its weights and
//! gradients lie (`LayerAddrs`), the batch's rows, the tape forward keeps for backward
//! (`LayerTape`, 8h + i floats a token, as ../cpu/layer.rs keeps) and the scratch every layer's pass
//! shares (`Scratch`), each allocated once for a row capacity and reused.
use super::device::{Addr, Buf, Device};
use candle_core::{bail, Result};

/// the CUDA kernels' ROW_WARPS and ATT_THREADS: a row kernel's warps a block, an attention block's
/// threads.
pub const ROW_WARPS: u32 = 4;
pub(super) const ATT_THREADS: u32 = 64;
/// Threads of an element-wise or column kernel's block.
pub(super) const THREADS: u32 = 256;
/// Blocks of a row kernel's backward and of GELU's backward: each writes a row of partial
/// column sums, which `column_sums` then adds in order.
pub const PARTS: usize = 64;

/// A layer's sizes.
#[derive(Clone, Copy, Debug)]
pub struct Dims {
    pub hidden: usize,
    pub intermediate: usize,
    pub heads: usize,
    pub scale: f32,
}

impl Dims {
    pub(super) fn head_dim(&self) -> usize {
        self.hidden / self.heads
    }
}

/// Where a layer's twelve tensors lie on the device (its weights, or its gradients), q, k and v
/// as one (3h x h) weight and one 3h bias, the rest as HF has them.
#[derive(Clone, Copy, Debug)]
pub struct LayerAddrs {
    pub wqkv: Addr,
    pub bqkv: Addr,
    pub wo: Addr,
    pub bo: Addr,
    pub g1: Addr,
    pub b1: Addr,
    pub wi: Addr,
    pub bi: Addr,
    pub wd: Addr,
    pub bd: Addr,
    pub g2: Addr,
    pub b2: Addr,
}

impl LayerAddrs {
    /// The twelve addresses in the fields' order.
    pub fn of(a: [Addr; 12]) -> LayerAddrs {
        let [wqkv, bqkv, wo, bo, g1, b1, wi, bi, wd, bd, g2, b2] = a;
        LayerAddrs {
            wqkv,
            bqkv,
            wo,
            bo,
            g1,
            b1,
            wi,
            bi,
            wd,
            bd,
            g2,
            b2,
        }
    }
}

/// A layer's four product weights as bf16 bits (--precision bf16), made from the f32 weights
/// each forward (the optimizer changes them between steps).
#[derive(Clone, Copy, Debug)]
pub struct Bf16Weights {
    pub wqkv: Addr,
    pub wo: Addr,
    pub wi: Addr,
    pub wd: Addr,
}

/// A layer's weights, their bf16 copies where the products run in bf16, and its LayerNorms'
/// epsilons.
#[derive(Clone, Copy, Debug)]
pub struct LayerParams {
    pub w: LayerAddrs,
    pub bf16: Option<Bf16Weights>,
    pub eps1: f32,
    pub eps2: f32,
}

/// The batch's rows on the device: `t` rows in `items` sequences (their first rows and lengths
/// as i32s), and each row's dropout identity.
#[derive(Clone, Copy, Debug)]
pub struct Rows {
    pub t: usize,
    pub items: usize,
    pub off: Addr,
    pub len: Addr,
    pub row_ids: Addr,
}

/// What forward keeps for backward, as ../cpu/layer.rs's `LayerTape`, for up to `rows` rows.
pub struct LayerTape<D: Device> {
    pub x: Buf<D, f32>,
    pub(super) qkv: Buf<D, f32>,
    pub(super) ctx: Buf<D, f32>,
    pub(super) lse: Buf<D, f32>,
    pub(super) a: Buf<D, f32>,
    pub(super) xhat1: Buf<D, f32>,
    pub(super) rstd1: Buf<D, f32>,
    pub(super) u: Buf<D, f32>,
    pub(super) xhat2: Buf<D, f32>,
    pub(super) rstd2: Buf<D, f32>,
    pub(super) rows: usize,
}

impl<D: Device> LayerTape<D> {
    pub fn new(dev: &D, rows: usize, d: Dims) -> Result<LayerTape<D>> {
        let (h, i) = (d.hidden, d.intermediate);
        let f = |n: usize| Buf::zeros(dev, rows * n);
        Ok(LayerTape {
            x: f(h)?,
            qkv: f(3 * h)?,
            ctx: f(h)?,
            lse: f(d.heads)?,
            a: f(h)?,
            xhat1: f(h)?,
            rstd1: f(1)?,
            u: f(i)?,
            xhat2: f(h)?,
            rstd2: f(1)?,
            rows,
        })
    }
}

/// Working buffers a layer's forward and backward share, for up to `rows` rows and `items`
/// sequences: every layer's pass uses them in turn.
pub struct Scratch<D: Device> {
    /// ao, then f (forward); dx (backward)
    pub(super) th: Buf<D, f32>,
    /// gelu(u) (forward and backward)
    pub(super) ti: Buf<D, f32>,
    /// du (backward)
    pub(super) du: Buf<D, f32>,
    /// da, df, dao, dctx (backward)
    pub(super) da: Buf<D, f32>,
    pub(super) df: Buf<D, f32>,
    pub(super) dctx: Buf<D, f32>,
    pub(super) dqkv: Buf<D, f32>,
    pub(super) partial: Buf<D, f32>,
    /// --precision bf16: a product's input (x, ctx, a, gelu(u)) and its output's gradient (dqkv,
    /// dao, du, df) as bf16 bits, made before the product; empty in f32
    pub(super) xb: Buf<D, u16>,
    pub(super) dyb: Buf<D, u16>,
    pub(super) rows: usize,
    pub(super) items: usize,
}

impl<D: Device> Scratch<D> {
    /// Room for `rows` rows and `items` items, and for bf16 operands where `bf16`; the
    /// backward's buffers a row wide where the stack runs forward alone (`backward` false:
    /// inference, which never reads them).
    pub fn new(
        dev: &D,
        (rows, items): (usize, usize),
        d: Dims,
        bf16: bool,
        backward: bool,
    ) -> Result<Scratch<D>> {
        let (h, i) = (d.hidden, d.intermediate);
        let partial = (PARTS * 3 * h).max(PARTS * i).max(items * 3 * h);
        let room = |n: usize| if bf16 { rows * n } else { 0 };
        let back = |n: usize| if backward { rows * n } else { n };
        Ok(Scratch {
            th: Buf::zeros(dev, rows * h)?,
            ti: Buf::zeros(dev, rows * i)?,
            du: Buf::zeros(dev, back(i))?,
            da: Buf::zeros(dev, back(h))?,
            df: Buf::zeros(dev, back(h))?,
            dctx: Buf::zeros(dev, back(h))?,
            dqkv: Buf::zeros(dev, back(3 * h))?,
            partial: Buf::zeros(dev, if backward { partial } else { 1 })?,
            xb: Buf::zeros(dev, room(h.max(i)))?,
            dyb: Buf::zeros(dev, if bf16 { back((3 * h).max(i)) } else { 0 })?,
            rows,
            items,
        })
    }

    /// Err unless the scratch holds `r`'s rows and items.
    pub(super) fn fits(&self, r: &Rows) -> Result<()> {
        if r.t > self.rows || r.items > self.items {
            bail!(
                "gpu engine: scratch for {} rows / {} items, a batch of {} / {}",
                self.rows,
                self.items,
                r.t,
                r.items
            )
        }
        Ok(())
    }

    /// The rooms for bf16 operands (an input's, an output gradient's), if it has them.
    pub(super) fn bf16_rooms(&self) -> Option<(Addr, Addr)> {
        (!self.xb.is_empty()).then(|| (self.xb.at(0), self.dyb.at(0)))
    }

    /// The buffer of partial column sums (a row kernel's backward writes them, `add_partials`
    /// adds them up).
    pub fn partial(&self) -> Addr {
        self.partial.at(0)
    }

    /// The input gradient `backward` returns (rows x hidden), until the next backward.
    pub fn dx(&self) -> &Buf<D, f32> {
        &self.th
    }
}
