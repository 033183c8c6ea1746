//! AdamW's update on the CPU: the per-element kernel (compiled per CPU class) applied to a
//! parameter in its own storage, chunks in parallel, and the gradient's squared norm.
use crate::model::kernels::vector::dot;
use candle_core::Result;
use rayon::prelude::*;

/// One step's AdamW constants, in f32 as torch computes an f32 parameter's update.
#[derive(Clone, Copy, Debug)]
pub struct Coefficients {
    pub scale: f32,
    /// 1 - beta1 and 1 - beta2, taken in f64 first as torch does with its Python floats
    /// (1 - 0.999f32 is 0.0010000467: a 5e-5 error in every second moment)
    pub c1: f32,
    pub b2: f32,
    pub c2: f32,
    pub decay: f32,
    pub step_size: f32,
    pub bc2_sqrt: f32,
    pub eps: f32,
}

crate::dispatch! {
    /// AdamW on a chunk, as torch's: m = lerp(m, g, 1 - b1), v = b2 v + (1 - b2) g^2,
    /// w = w (1 - lr wd) - (lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps); g scaled first.
    pub fn adamw_chunk(w: &mut [f32], g: &[f32], m: &mut [f32], v: &mut [f32], c: &Coefficients) {
        for i in 0..w.len() {
            let gi = g[i] * c.scale;
            m[i] += (gi - m[i]) * c.c1;
            v[i] = v[i] * c.b2 + gi * gi * c.c2;
            let denom = v[i].sqrt() / c.bc2_sqrt + c.eps;
            w[i] = w[i] * c.decay - c.step_size * m[i] / denom;
        }
    }
}

crate::dispatch! {
    /// sum of x^2 in 16 f32 lanes.
    pub fn sum_squares(x: &[f32]) -> f32 {
        dot(x, x)
    }
}

/// The update of one parameter in its own storage (no new tensor per step), chunks in parallel.
pub struct HostUpdate<'a> {
    pub g: &'a [f32],
    pub moments: std::cell::RefCell<(&'a mut Vec<f32>, &'a mut Vec<f32>)>,
    pub c: Coefficients,
}

impl candle_core::InplaceOp1 for HostUpdate<'_> {
    fn name(&self) -> &'static str {
        "adamw"
    }

    fn cpu_fwd(
        &self,
        storage: &mut candle_core::CpuStorage,
        layout: &candle_core::Layout,
    ) -> Result<()> {
        let (a, b) = layout
            .contiguous_offsets()
            .ok_or_else(|| candle_core::Error::Msg("adamw: a contiguous parameter".into()))?;
        let candle_core::CpuStorage::F32(data) = storage else {
            candle_core::bail!("adamw: an f32 parameter")
        };
        let w = &mut data[a..b];
        let mut mv = self.moments.borrow_mut();
        let (m, v) = &mut *mv;
        let (g, c) = (self.g, self.c);
        const C: usize = 1 << 15;
        w.par_chunks_mut(C)
            .zip(m.par_chunks_mut(C))
            .zip(v.par_chunks_mut(C))
            .zip(g.par_chunks(C))
            .for_each(|(((w, m), v), g)| adamw_chunk(w, g, m, v, &c));
        Ok(())
    }
}
