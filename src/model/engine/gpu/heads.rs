//! A sentence encoder's head on the device (engine/gpu/kernels/heads.cu): a stack's last rows
//! pooled into one embedding an item and normalised where the model's Normalize module says,
//! and the way back from the embeddings' gradient to the rows', with no candle tensor between.
//! The row normalisation is also what a cosine ranking loss runs (train/biencoder).
use super::buffers::{Rows, ROW_WARPS, THREADS};
use super::device::{Addr, Arg, Buf, Device};
use super::grads::Grads;
use super::stack::Stack;
use crate::model::{Bert, Dropout, Pooling};
use candle_core::Result;

/// The poolings the device runs: cls, mean and mean_sqrt_len, alone or together (heads.cu's
/// flags). Max needs its winners kept for the backward; candle pools it from padded rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DevicePooling {
    flags: i32,
    modes: usize,
}

impl DevicePooling {
    pub fn of(p: Pooling) -> Option<DevicePooling> {
        if p.max {
            return None;
        }
        let flags = (p.cls as i32) | (p.mean as i32) << 1 | (p.mean_sqrt_len as i32) << 2;
        (flags != 0).then_some(DevicePooling {
            flags,
            modes: p.modes(),
        })
    }
}

/// Each item's embedding (items x h x the pooling's modes, at `out`) from the packed rows
/// (t x h at `x`) laid out as `rows` says.
pub fn pool<D: Device>(
    dev: &D,
    p: DevicePooling,
    (x, rows): (Addr, &Rows),
    h: usize,
    out: Addr,
) -> Result<()> {
    pooling_launch(dev, "pool_rows", p, (x, rows), h, out)
}

/// `pool`'s backward: every packed row's gradient (t x h at `dx`, all written) from the
/// embeddings' (at `g`).
pub fn pool_backward<D: Device>(
    dev: &D,
    p: DevicePooling,
    (g, rows): (Addr, &Rows),
    h: usize,
    dx: Addr,
) -> Result<()> {
    pooling_launch(dev, "pool_rows_backward", p, (g, rows), h, dx)
}

/// One of the two pooling kernels (they take the same arguments), a block an item.
fn pooling_launch<D: Device>(
    dev: &D,
    kernel: &str,
    p: DevicePooling,
    (from, rows): (Addr, &Rows),
    h: usize,
    to: Addr,
) -> Result<()> {
    let args = [
        Arg::Addr(from),
        Arg::Addr(rows.off),
        Arg::Addr(rows.len),
        Arg::I32(p.flags),
        Arg::I32(h as i32),
        Arg::Addr(to),
    ];
    dev.launch(kernel, (rows.items as u32, 1), THREADS, &args)
}

/// Rows (n x h at x) divided by their norms into y, the norms (n) into `norms`.
pub fn normalize<D: Device>(
    dev: &D,
    x: Addr,
    (n, h): (usize, usize),
    y: Addr,
    norms: Addr,
) -> Result<()> {
    let args = [
        Arg::Addr(x),
        Arg::I32(n as i32),
        Arg::I32(h as i32),
        Arg::Addr(y),
        Arg::Addr(norms),
    ];
    let blocks = (n as u32).div_ceil(ROW_WARPS);
    dev.launch("normalize_rows", (blocks, 1), 32 * ROW_WARPS, &args)
}

/// `normalize`'s backward: dx from dy, y and the norms (dx may be dy).
pub fn normalize_backward<D: Device>(
    dev: &D,
    (y, norms): (Addr, Addr),
    dy: Addr,
    (n, h): (usize, usize),
    dx: Addr,
) -> Result<()> {
    let args = [
        Arg::Addr(y),
        Arg::Addr(norms),
        Arg::Addr(dy),
        Arg::I32(n as i32),
        Arg::I32(h as i32),
        Arg::Addr(dx),
    ];
    let blocks = (n as u32).div_ceil(ROW_WARPS);
    dev.launch(
        "normalize_rows_backward",
        (blocks, 1),
        32 * ROW_WARPS,
        &args,
    )
}

/// The head's memory for up to `items` embeddings.
struct Rooms<D: Device> {
    items: usize,
    pooled: Buf<D, f32>,
    normed: Buf<D, f32>,
    norms: Buf<D, f32>,
    grad: Buf<D, f32>,
}

/// Pooling (and normalisation) of a stack's last forward on its device, its buffers allocated
/// for the most items a forward has had and reused.
pub struct EmbedHead<D: Device> {
    pooling: DevicePooling,
    normalize: bool,
    /// the embedding's width: hidden x the pooling's modes
    pub width: usize,
    rooms: Option<Rooms<D>>,
    /// the items of the last forward
    items: usize,
}

impl<D: Device> EmbedHead<D> {
    pub fn new(pooling: DevicePooling, normalize: bool, hidden: usize) -> EmbedHead<D> {
        EmbedHead {
            pooling,
            normalize,
            width: hidden * pooling.modes,
            rooms: None,
            items: 0,
        }
    }

    /// The embeddings (items x width) of `stack`'s last forward, valid until the next call.
    pub fn forward(&mut self, stack: &Stack<D>) -> Result<Addr> {
        let dev = stack.device();
        let last = stack.last_rows()?;
        let (n, w) = (last.rows.items, self.width);
        if self.rooms.as_ref().is_none_or(|r| r.items < n) {
            self.rooms = None; // freed before the larger one is allocated
            self.rooms = Some(Rooms {
                items: n,
                pooled: Buf::zeros(dev, n * w)?,
                normed: Buf::zeros(dev, n * w)?,
                norms: Buf::zeros(dev, n)?,
                grad: Buf::zeros(dev, n * w)?,
            });
        }
        let r = self.rooms.as_ref().expect("made above");
        let h = w / self.pooling.modes;
        pool(
            dev,
            self.pooling,
            (last.states, &last.rows),
            h,
            r.pooled.at(0),
        )?;
        self.items = n;
        if !self.normalize {
            return Ok(r.pooled.at(0));
        }
        normalize(dev, r.pooled.at(0), (n, w), r.normed.at(0), r.norms.at(0))?;
        Ok(r.normed.at(0))
    }

    /// Where the caller writes the gradient of the last forward's embeddings (items x width)
    /// before `backward`.
    pub fn grad(&self) -> Result<Addr> {
        match &self.rooms {
            Some(r) => Ok(r.grad.at(0)),
            None => candle_core::bail!("gpu engine: a head's gradient before its forward"),
        }
    }

    /// The engine's backward from the embeddings' gradient in `grad()` (overwritten), into
    /// `grads`; `stack`'s last forward must be this head's.
    pub fn backward(
        &self,
        stack: &mut Stack<D>,
        bert: &Bert,
        drop: Option<&Dropout>,
        grads: &Grads<D>,
    ) -> Result<()> {
        let Some(r) = &self.rooms else {
            candle_core::bail!("gpu engine: a head's backward before its forward")
        };
        let (n, w) = (self.items, self.width);
        // checked before any launch: a stale head, or a stack without a tape, must not touch
        // the gradient's room
        stack.can_backward()?;
        let last = stack.last_rows()?;
        if last.rows.items != n {
            candle_core::bail!("gpu engine: a head's backward after another forward")
        }
        let dev = stack.device();
        if self.normalize {
            let g = r.grad.at(0);
            normalize_backward(dev, (r.normed.at(0), r.norms.at(0)), g, (n, w), g)?;
        }
        let h = w / self.pooling.modes;
        pool_backward(dev, self.pooling, (r.grad.at(0), &last.rows), h, last.grad)?;
        stack.backward_last(bert, drop, grads)
    }
}

#[cfg(test)]
#[path = "heads_test.rs"]
mod tests;
