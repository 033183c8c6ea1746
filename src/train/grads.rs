//! The gradients a training step keeps: one per trainable parameter, each detached from the
//! graph that produced it, summed in one place (mini-batches, threads' shards, accumulation).
//!
//! Why detached: candle's backward detaches every intermediate gradient it visits but not the
//! leaves' (the parameters'), so a weight gradient made as matmul(dy^T, x) still records the op
//! and holds `x`, and through it the whole forward graph of its batch, for as long as the
//! gradient lives. Kept across GradCache's mini-batches or gradient accumulation that is every
//! batch's activations at once: memory grows with the batch the method exists to bound.
use crate::error::Result;
use crate::model::engine::gpu::Lease;
use candle_core::backprop::GradStore;
use candle_core::{Tensor, TensorId, Var};
use std::collections::HashMap;

#[derive(Default)]
pub struct ParamGrads {
    map: HashMap<TensorId, Tensor>,
    /// what keeps the GPU engine's arena from being overwritten while gradients here are views
    /// of it (model/engine/gpu/grads.rs): held as long as these gradients are
    held: Vec<Lease>,
}

impl ParamGrads {
    /// The parameters' gradients out of a backward pass's store, detached; the store (and every
    /// activation-sized gradient in it) is dropped here.
    pub fn from_store(params: &[Var], mut store: GradStore) -> ParamGrads {
        let map = params
            .iter()
            .filter_map(|v| store.remove(v.as_tensor()).map(|g| (v.id(), g.detach())))
            .collect();
        ParamGrads {
            map,
            held: Vec::new(),
        }
    }

    /// Add `other`'s gradients to these, parameter by parameter (the one summation every caller
    /// uses); a parameter only one side has keeps that side's.
    pub fn add(&mut self, other: ParamGrads) -> Result<()> {
        self.held.extend(other.held);
        for (id, g) in other.map {
            let sum = match self.map.remove(&id) {
                Some(mine) => (mine + g)?.detach(),
                None => g,
            };
            self.map.insert(id, sum);
        }
        Ok(())
    }

    /// Add gradients given as (parameter, gradient) pairs (the engine's): each detached.
    pub fn add_pairs(&mut self, pairs: Vec<(Tensor, Tensor)>) -> Result<()> {
        self.add(ParamGrads::of_pairs(pairs))
    }

    /// An engine's gradients, (parameter, gradient) pairs, each detached.
    pub fn of_pairs(pairs: Vec<(Tensor, Tensor)>) -> ParamGrads {
        let map = pairs
            .into_iter()
            .map(|(p, g)| (p.id(), g.detach()))
            .collect();
        ParamGrads {
            map,
            held: Vec::new(),
        }
    }

    /// The GPU engine's gradients (its `Grads::export`): views of its arena, held by `lease`.
    pub fn of_arena((pairs, lease): (Vec<(Tensor, Tensor)>, Lease)) -> ParamGrads {
        let mut out = ParamGrads::of_pairs(pairs);
        out.hold(lease);
        out
    }

    /// Keep `lease` as long as these gradients: some are views of the GPU engine's arena.
    pub fn hold(&mut self, lease: Lease) {
        self.held.push(lease);
    }

    /// The gradient of `param`, if the loss reached it.
    pub fn get(&self, param: &Tensor) -> Option<&Tensor> {
        self.map.get(&param.id())
    }

    /// The gradients in the order of `params` (the optimizer's).
    pub fn in_order(&self, params: &[Var]) -> Vec<Option<Tensor>> {
        params
            .iter()
            .map(|v| self.map.get(&v.id()).cloned())
            .collect()
    }

    /// Whether any kept gradient still records the op that made it (and so holds a graph): never,
    /// by construction; tests check it.
    pub fn any_tracked(&self) -> bool {
        self.map.values().any(|g| g.track_op())
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

#[cfg(test)]
impl ParamGrads {
    /// These gradients (of parameters `vars.0`) against `want`'s (of `vars.1`, the same model
    /// elsewhere: another engine's step), parameter by parameter in order: each within `tol.0`
    /// of its largest value (floored at 1e-3: MiniLM's gradients are small, and their rounding
    /// smaller), and all together within `tol.1` of their L2 norm (rounding's differences are
    /// spread thin, a wrong product's are not). Prints the latter.
    pub fn assert_close_to(&self, want: &ParamGrads, vars: (&[Var], &[Var]), tol: (f32, f64)) {
        let (gs, ws) = (self.in_order(vars.0), want.in_order(vars.1));
        let (mut off, mut norm) = (0f64, 0f64);
        // every parameter is measured before anything is asserted, so that a failure on a lent
        // GPU (one run, no second look) reports the whole comparison: the worst parameter
        // against its bound and the norm's difference
        let mut worst_each: Option<(usize, f32, f32)> = None;
        assert!(vars.1.len() > 100, "{} parameters", vars.1.len());
        for (k, (g, w)) in gs.iter().zip(&ws).enumerate() {
            let (Some(g), Some(w)) = (g, w) else {
                panic!("parameter {k}: a gradient on one side only")
            };
            let (g, w): (Vec<f32>, Vec<f32>) = (
                g.flatten_all().unwrap().to_vec1().unwrap(),
                w.flatten_all().unwrap().to_vec1().unwrap(),
            );
            let scale = w.iter().fold(1e-3f32, |m, v| m.max(v.abs()));
            let worst = g
                .iter()
                .zip(&w)
                .map(|(a, b)| (a - b).abs())
                .fold(0f32, f32::max);
            if worst_each.is_none_or(|(_, o, s)| worst / scale > o / s) {
                worst_each = Some((k, worst, scale));
            }
            for (a, b) in g.iter().zip(&w) {
                off += ((a - b) as f64).powi(2);
                norm += (*b as f64).powi(2);
            }
        }
        let rel = (off / norm).sqrt();
        let (k, worst, scale) = worst_each.expect("parameters");
        eprintln!(
            "gradients' relative L2 difference: {rel:.3e}; the worst parameter {k}: {:.3e} of its \
             largest value",
            worst / scale
        );
        assert!(
            worst <= tol.0 * scale,
            "parameter {k}: off by {worst} (scale {scale}), {:.3e} of it against {:.1e}; the \
             norm's difference {rel:.3e}",
            worst / scale,
            tol.0
        );
        assert!(
            rel <= tol.1,
            "the gradients differ by {rel:.3e} of their norm"
        );
    }
}
