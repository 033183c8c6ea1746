//! A stack's last forward's rows as the heads take them, and their gradient back: padded into a
//! candle tensor (`padded`, `backward_padded`: candle's heads and losses), or packed on the
//! device (`last_rows`: heads.rs pools them there). A child of stack.rs, for its fields.
use super::super::buffers::Rows;
use super::super::device::{Addr, Arg, Device};
use super::super::grads::Grads;
use super::Stack;
use crate::model::{Bert, Dropout};
use candle_core::{bail, Result, Tensor, Var};

/// A forward's last rows, packed on the device (`Stack::last_rows`).
pub struct LastRows {
    pub rows: Rows,
    pub states: Addr,
    pub grad: Addr,
}

impl<D: Device> Stack<D> {
    /// The last forward's rows on the device: their layout, the states (what `forward`
    /// returned) and the room for their gradient that `backward_last` starts from (rows x
    /// hidden, packed).
    pub fn last_rows(&self) -> Result<LastRows> {
        let (Some(batch), Some(ws)) = (&self.batch, &self.ws) else {
            bail!("gpu engine: no forward before")
        };
        Ok(LastRows {
            rows: ws.rows_of(&batch.packed),
            states: ws.hidden.at(0),
            grad: ws.dh.at(0),
        })
    }

    /// `backward` from the gradient in the room `last_rows` gave.
    pub fn backward_last(
        &mut self,
        bert: &Bert,
        drop: Option<&Dropout>,
        grads: &Grads<D>,
    ) -> Result<()> {
        let grad = self.last_rows()?.grad;
        self.backward(bert, grad, drop, grads)
    }

    /// The last forward's rows (at `hidden`) as candle's heads take them: a (b, len, h) tensor
    /// on `on` (zeros where padded), its (b, len) 0/1 mask, and len.
    pub fn padded(&self, hidden: Addr, on: &candle_core::Device) -> Result<(Var, Tensor, usize)> {
        let (Some(batch), Some(ws)) = (&self.batch, &self.ws) else {
            bail!("gpu engine: no forward to pad")
        };
        let p = &batch.packed;
        let (b, h) = (p.lens().len(), self.dims.hidden);
        let len = p.lens().iter().copied().max().unwrap_or(0).max(1);
        let (states, at) = self.dev.new_var(&[b, len, h], on)?;
        let rows = ws.rows_of(p);
        let args = [
            Arg::Addr(hidden),
            Arg::Addr(rows.off),
            Arg::Addr(rows.len),
            Arg::I32(len as i32),
            Arg::I32(h as i32),
            Arg::Addr(at),
        ];
        self.dev.launch("pad_rows", (b as u32, 1), 256, &args)?;
        let mut mask = vec![0u32; b * len];
        for (i, &n) in p.lens().iter().enumerate() {
            mask[i * len..i * len + n].fill(1);
        }
        Ok((states, Tensor::from_vec(mask, (b, len), on)?, len))
    }

    /// `backward` from the gradient of `padded`'s states (b, len, h; the padding's part dropped).
    pub fn backward_padded(
        &mut self,
        bert: &Bert,
        g: &Tensor,
        drop: Option<&Dropout>,
        grads: &Grads<D>,
    ) -> Result<()> {
        self.can_backward()?;
        let (Some(batch), Some(ws)) = (&self.batch, &self.ws) else {
            bail!("gpu engine: backward without a forward before it")
        };
        let p = &batch.packed;
        let (b, len, h) = g.dims3()?;
        if b != p.lens().len()
            || h != self.dims.hidden
            || len < p.lens().iter().copied().max().unwrap_or(0)
        {
            bail!(
                "gpu engine: a gradient of {:?} for {} items",
                g.dims(),
                p.lens().len()
            )
        }
        let g = g.contiguous()?;
        let rows = ws.rows_of(p);
        let args = [
            Arg::Addr(self.dev.tensor_addr(&g)?),
            Arg::Addr(rows.off),
            Arg::Addr(rows.len),
            Arg::I32(len as i32),
            Arg::I32(h as i32),
            Arg::Addr(ws.dh.at(0)),
        ];
        self.dev.launch("unpad_rows", (b as u32, 1), 256, &args)?;
        let dh = ws.dh.at(0);
        self.backward(bert, dh, drop, grads)
    }
}
