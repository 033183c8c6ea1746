//! Cross-entropy over class logits as one CPU f32 op: mean over rows of logsumexp(x) - x[class].
//! Composed, it is eight graph nodes over the (rows, classes) logits, each with its own output and
//! backward buffer; for an MLM head those are positions x 30,522 floats. Backward: (softmax(x) -
//! onehot(class)) / rows times the incoming gradient. Rows are reduced in the engine's row kernels
//! (compiled per CPU class).
use crate::model::kernels::softmax::{log_sum_exp, scaled_softmax};
use candle_core::{bail, CpuStorage, CustomOp2, DType, Layout, Result, Shape, Tensor};
use rayon::prelude::*;

fn rows_of<'a>(s: &'a CpuStorage, l: &Layout) -> Result<&'a [f32]> {
    match l.contiguous_offsets() {
        Some((a, b)) => Ok(&s.as_slice::<f32>()?[a..b]),
        None => bail!("cross-entropy: contiguous logits are required"),
    }
}

fn classes_of(s: &CpuStorage, l: &Layout) -> Result<Vec<usize>> {
    let Some((a, b)) = l.contiguous_offsets() else {
        bail!("cross-entropy: contiguous classes are required")
    };
    Ok(s.as_slice::<u32>()?[a..b]
        .iter()
        .map(|&c| c as usize)
        .collect())
}

struct Fwd;

impl CustomOp2 for Fwd {
    fn name(&self) -> &'static str {
        "cross-entropy"
    }

    fn cpu_fwd(
        &self,
        sx: &CpuStorage,
        lx: &Layout,
        sc: &CpuStorage,
        lc: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let x = rows_of(sx, lx)?;
        let classes = classes_of(sc, lc)?;
        let c = lx.dims()[1];
        let losses: Vec<f64> = x
            .par_chunks(c)
            .zip(&classes)
            .map(|(row, &k)| (log_sum_exp(row) - row[k]) as f64)
            .collect();
        let mean = losses.iter().sum::<f64>() / classes.len().max(1) as f64;
        Ok((CpuStorage::F32(vec![mean as f32]), Shape::from(())))
    }

    fn bwd(
        &self,
        x: &Tensor,
        classes: &Tensor,
        _res: &Tensor,
        g: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let scale = g.to_dtype(DType::F32)?.to_scalar::<f32>()?;
        let dx = x.apply_op2(classes, Bwd { scale })?;
        Ok((Some(dx), None))
    }
}

/// (softmax(x) - onehot) * scale / rows.
struct Bwd {
    scale: f32,
}

impl CustomOp2 for Bwd {
    fn name(&self) -> &'static str {
        "cross-entropy-backward"
    }

    fn cpu_fwd(
        &self,
        sx: &CpuStorage,
        lx: &Layout,
        sc: &CpuStorage,
        lc: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let x = rows_of(sx, lx)?;
        let classes = classes_of(sc, lc)?;
        let c = lx.dims()[1];
        let k = self.scale / classes.len().max(1) as f32;
        let mut dx = vec![0f32; x.len()];
        dx.par_chunks_mut(c)
            .zip(x.par_chunks(c))
            .zip(&classes)
            .for_each(|((d, row), &cls)| {
                scaled_softmax(row, log_sum_exp(row), k, d);
                d[cls] -= k;
            });
        Ok((CpuStorage::F32(dx), lx.shape().clone()))
    }
}

/// Whether the fused op applies: f32 logits (rows, classes) and u32 class ids on the CPU.
pub fn usable(logits: &Tensor, classes: &Tensor) -> bool {
    logits.device().is_cpu()
        && logits.dtype() == DType::F32
        && logits.rank() == 2
        && classes.dtype() == DType::U32
        && classes.rank() == 1
        && classes.dim(0).ok() == logits.dim(0).ok()
        && logits.elem_count() > 0
}

pub fn fused(logits: &Tensor, classes: &Tensor) -> Result<Tensor> {
    let c = logits.dim(1)? as u32;
    let ids = classes.to_vec1::<u32>()?;
    if let Some(bad) = ids.iter().find(|&&k| k >= c) {
        bail!("cross-entropy: class {bad} is outside the {c} classes");
    }
    logits.contiguous()?.apply_op2(&classes.contiguous()?, Fwd)
}
