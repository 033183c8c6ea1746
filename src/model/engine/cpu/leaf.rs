//! Where the engine meets candle: a forward whose last layer's states enter candle's graph as a
//! leaf (padded to (b, len, h), with the 0/1 mask the heads pool by), so that a head and a loss run
//! as candle ops; after candle's backward, the leaf's gradient goes back through the engine.
use super::grads::Grads;
use super::stack::{Forward, Stack};
use candle_core::backprop::GradStore;
use candle_core::{Device, Result, Tensor, Var};

pub struct Leaf {
    /// (b, len, h): the states of real tokens, zeros where padded.
    pub states: Var,
    /// (b, len) 0/1: 1 for real tokens.
    pub mask: Tensor,
    fwd: Forward,
    len: usize,
}

impl Leaf {
    /// Run `engine` forward on the sequences (named by `keys` for dropout), keeping its tape.
    pub fn forward(
        engine: &Stack,
        ids: &[&[u32]],
        types: Option<&[&[u32]]>,
        keys: &[u64],
        drop: Option<&crate::model::Dropout>,
    ) -> Result<Leaf> {
        let fwd = engine.forward(ids, types, Some(keys), drop, true)?;
        let (states, mask, len) = pad(&fwd)?;
        Ok(Leaf {
            states: Var::from_tensor(&states)?,
            mask,
            fwd,
            len,
        })
    }

    /// The engine's backward from the leaf's gradient in `store` (none: the loss did not reach
    /// it, and nothing is accumulated).
    pub fn backward(
        self,
        engine: &Stack,
        store: &GradStore,
        drop: Option<&crate::model::Dropout>,
        grads: &mut Grads,
    ) -> Result<()> {
        let Some(g) = store.get(self.states.as_tensor()) else {
            return Ok(());
        };
        let g: Vec<f32> = g.flatten_all()?.to_vec1()?;
        let h = self.fwd.hidden.len() / self.fwd.packed.rows().max(1);
        let p = &self.fwd.packed;
        let mut d = vec![0f32; p.rows() * h];
        for (i, (&off, &n)) in p.offsets().iter().zip(p.lens()).enumerate() {
            let src = i * self.len * h;
            d[off * h..(off + n) * h].copy_from_slice(&g[src..src + n * h]);
        }
        engine.backward(self.fwd, d, Vec::new(), drop, grads)?;
        Ok(())
    }
}

/// The packed rows of a forward as a padded (b, len, h) tensor and its (b, len) mask.
pub fn pad(fwd: &Forward) -> Result<(Tensor, Tensor, usize)> {
    let p = &fwd.packed;
    let b = p.lens().len();
    let len = p.lens().iter().copied().max().unwrap_or(0).max(1);
    let h = fwd.hidden.len() / p.rows().max(1);
    let mut out = vec![0f32; b * len * h];
    let mut mask = vec![0u32; b * len];
    for (i, (&off, &n)) in p.offsets().iter().zip(p.lens()).enumerate() {
        out[i * len * h..(i * len + n) * h].copy_from_slice(&fwd.hidden[off * h..(off + n) * h]);
        mask[i * len..i * len + n].fill(1);
    }
    let dev = Device::Cpu;
    Ok((
        Tensor::from_vec(out, (b, len, h), &dev)?,
        Tensor::from_vec(mask, (b, len), &dev)?,
        len,
    ))
}
