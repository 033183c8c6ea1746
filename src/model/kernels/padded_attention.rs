//! Multi-head attention's core in candle's graph (padded batches): softmax(q k^T * scale + mask)
//! (with dropout) times v, as one CPU f32 op on q, k, v in BERT's (b, s, hidden) layout. The
//! engine has its own attention (engine/cpu/packed_attention.rs) and the two cannot be one: candle
//! hands this op padded (b, s, h) tensors and a dropout mask drawn from its stream, the engine
//! packed rows and a mask it hashes again in backward, keeping a log-sum-exp per row instead of
//! recomputing the scores. Their row math is shared (softmax.rs). Each head is a column block of hidden, so
//! the op reaches it through sgemm's leading dimensions: no head split or merge (three reshapes,
//! transposes and copies per tensor) and no probability tensors in the graph. Composed, the core
//! was ~17 graph nodes per layer, each with an output and, in training, a gradient buffer that
//! candle zero-fills and accumulates into. Backward recomputes the probabilities (one small GEMM
//! per head) and reuses the forward's dropout mask:
//!   dV = Pd^T dC,  dPd = dC V^T,  dP = dPd * mask,  dS = scale * P * (dP - rowsum(dP * P)),
//!   dQ = dS K,  dK = dS^T Q.
use super::blas::{blas, NO_TRANS, TRANS};
use super::contiguous_f32;
use super::softmax::{score_grad_row, softmax_row};
use super::vector::dot;
use candle_core::{CpuStorage, CustomOp3, DType, Layout, Result, Shape, Tensor};
use rayon::prelude::*;
use std::sync::Arc;

/// Every product here has s, head_dim > 0: `usable` refuses empty inputs.
const NONEMPTY: &str = "attention: non-empty operands (checked by usable)";

#[derive(Clone)]
pub struct Attention {
    heads: usize,
    scale: f32,
    /// Additive key bias per (batch item, key): 0, or the most negative value for padding.
    bias: Arc<Vec<f32>>,
    /// Dropout on the probabilities: per (b, head, query, key) 0 or 1/(1 - p); None without.
    mask: Option<Arc<Vec<f32>>>,
}

/// Run `f(item, out_chunk)` for every batch item, in parallel with serial BLAS when the caller is
/// not itself one of several training threads (then OpenBLAS is already serial).
fn per_item(out: &mut [f32], items: usize, f: impl Fn(usize, &mut [f32]) + Sync) {
    let per = out.len() / items.max(1);
    if items > 1 && super::blas::may_split() {
        super::blas::serial(|| {
            out.par_chunks_mut(per)
                .enumerate()
                .for_each(|(i, o)| f(i, o))
        });
    } else {
        for (i, o) in out.chunks_mut(per).enumerate() {
            f(i, o);
        }
    }
}

impl Attention {
    /// Probabilities P (s x s) of one head of one item: softmax(Q K^T * scale + bias).
    fn probs(&self, q: &[f32], k: &[f32], bias: &[f32], s: usize, hd: usize, h: usize) -> Vec<f32> {
        let mut p = vec![0f32; s * s];
        let blas = blas().expect("checked by usable()");
        blas.gemm(NO_TRANS, TRANS, s, s, hd, q, h, k, h, 0.0, &mut p, s)
            .expect(NONEMPTY);
        for row in p.chunks_mut(s) {
            for (o, &b) in row.iter_mut().zip(bias) {
                *o = *o * self.scale + b;
            }
            softmax_row(row, 1.0);
        }
        p
    }

    /// The dropout mask of one head of one item, if any.
    fn head_mask(&self, item: usize, head: usize, s: usize) -> Option<&[f32]> {
        let at = (item * self.heads + head) * s * s;
        self.mask.as_ref().map(|m| &m[at..at + s * s])
    }
}

impl CustomOp3 for Attention {
    fn name(&self) -> &'static str {
        "attention"
    }

    fn cpu_fwd(
        &self,
        sq: &CpuStorage,
        lq: &Layout,
        sk: &CpuStorage,
        lk: &Layout,
        sv: &CpuStorage,
        lv: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (q, k, v) = (
            contiguous_f32(sq, lq, "attention")?,
            contiguous_f32(sk, lk, "attention")?,
            contiguous_f32(sv, lv, "attention")?,
        );
        let (b, s, h) = lq.shape().dims3()?;
        let hd = h / self.heads;
        let mut ctx = vec![0f32; b * s * h];
        let blas = blas().expect("checked by usable()");
        per_item(&mut ctx, b, |i, out| {
            let at = i * s * h;
            let bias = &self.bias[i * s..(i + 1) * s];
            for head in 0..self.heads {
                let c = head * hd;
                let (qh, kh, vh) = (&q[at + c..], &k[at + c..], &v[at + c..]);
                let mut p = self.probs(qh, kh, bias, s, hd, h);
                if let Some(m) = self.head_mask(i, head, s) {
                    p.iter_mut().zip(m).for_each(|(x, m)| *x *= m);
                }
                blas.gemm(
                    NO_TRANS,
                    NO_TRANS,
                    s,
                    hd,
                    s,
                    &p,
                    s,
                    vh,
                    h,
                    0.0,
                    &mut out[c..],
                    h,
                )
                .expect(NONEMPTY);
            }
        });
        Ok((CpuStorage::F32(ctx), lq.shape().clone()))
    }

    fn bwd(
        &self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        _ctx: &Tensor,
        dctx: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let (b, s, h) = q.dims3()?;
        // one op computes dq, dk and dv, stacked as (3, b, s, h)
        let grads = Tensor::stack(&[q, k, v], 0)?.apply_op2(
            &dctx.contiguous()?,
            Backward {
                fwd: self.clone(),
                shape: (b, s, h),
            },
        )?;
        Ok((
            Some(grads.get(0)?),
            Some(grads.get(1)?),
            Some(grads.get(2)?),
        ))
    }
}

struct Backward {
    fwd: Attention,
    shape: (usize, usize, usize),
}

impl candle_core::CustomOp2 for Backward {
    fn name(&self) -> &'static str {
        "attention-backward"
    }

    fn cpu_fwd(
        &self,
        sqkv: &CpuStorage,
        lqkv: &Layout,
        sg: &CpuStorage,
        lg: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (qkv, dc) = (
            contiguous_f32(sqkv, lqkv, "attention")?,
            contiguous_f32(sg, lg, "attention")?,
        );
        let (b, s, h) = self.shape;
        let n = b * s * h;
        let (q, k, v) = (&qkv[..n], &qkv[n..2 * n], &qkv[2 * n..]);
        let a = &self.fwd;
        let hd = h / a.heads;
        let blas = blas().expect("checked by usable()");
        // per item, its dq, dk and dv rows side by side: (b, 3, s, h), reordered below
        let mut out = vec![0f32; 3 * n];
        per_item(&mut out, b, |i, o| {
            let at = i * s * h;
            let bias = &a.bias[i * s..(i + 1) * s];
            let (dq, rest) = o.split_at_mut(s * h);
            let (dk, dv) = rest.split_at_mut(s * h);
            let mut dp = vec![0f32; s * s];
            for head in 0..a.heads {
                let c = head * hd;
                let (qh, kh, vh, dch) = (&q[at + c..], &k[at + c..], &v[at + c..], &dc[at + c..]);
                let p = a.probs(qh, kh, bias, s, hd, h);
                let mask = a.head_mask(i, head, s);
                // dV = Pd^T dC, with Pd the dropped probabilities
                let pd: Vec<f32> = match mask {
                    Some(m) => p.iter().zip(m).map(|(x, m)| x * m).collect(),
                    None => p.clone(),
                };
                blas.gemm(
                    TRANS,
                    NO_TRANS,
                    s,
                    hd,
                    s,
                    &pd,
                    s,
                    dch,
                    h,
                    0.0,
                    &mut dv[c..],
                    h,
                )
                .expect(NONEMPTY);
                // dP = (dC V^T) * mask; dS = scale * P * (dP - rowsum(dP * P))
                blas.gemm(NO_TRANS, TRANS, s, s, hd, dch, h, vh, h, 0.0, &mut dp, s)
                    .expect(NONEMPTY);
                if let Some(m) = mask {
                    dp.iter_mut().zip(m).for_each(|(x, m)| *x *= m);
                }
                for (dr, pr) in dp.chunks_mut(s).zip(p.chunks(s)) {
                    let d = dot(dr, pr);
                    score_grad_row(dr, pr, d, a.scale);
                }
                blas.gemm(
                    NO_TRANS,
                    NO_TRANS,
                    s,
                    hd,
                    s,
                    &dp,
                    s,
                    kh,
                    h,
                    0.0,
                    &mut dq[c..],
                    h,
                )
                .expect(NONEMPTY);
                blas.gemm(
                    TRANS,
                    NO_TRANS,
                    s,
                    hd,
                    s,
                    &dp,
                    s,
                    qh,
                    h,
                    0.0,
                    &mut dk[c..],
                    h,
                )
                .expect(NONEMPTY);
            }
        });
        // (b, 3, s, h) -> (3, b, s, h)
        let mut stacked = vec![0f32; 3 * n];
        for i in 0..b {
            for t in 0..3 {
                let from = (i * 3 + t) * s * h;
                let to = t * n + i * s * h;
                stacked[to..to + s * h].copy_from_slice(&out[from..from + s * h]);
            }
        }
        Ok((CpuStorage::F32(stacked), Shape::from((3, b, s, h))))
    }
}

/// Whether the fused op applies: BLAS loaded, everything on the CPU in f32.
pub fn usable(q: &Tensor) -> bool {
    blas().is_some()
        && q.device().is_cpu()
        && q.dtype() == DType::F32
        && q.rank() == 3
        && q.elem_count() > 0
}

/// The attention context (b, s, h) of q, k, v (b, s, h) with `heads` heads, `bias` the additive
/// key mask (b, 1, 1, s), and `mask` an optional dropout mask (b * heads * s * s values).
pub fn attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    bias: &Tensor,
    heads: usize,
    scale: f64,
    mask: Option<Vec<f32>>,
) -> Result<Tensor> {
    let op = Attention {
        heads,
        scale: scale as f32,
        bias: Arc::new(bias.flatten_all()?.to_dtype(DType::F32)?.to_vec1()?),
        mask: mask.map(Arc::new),
    };
    q.contiguous()?
        .apply_op3(&k.contiguous()?, &v.contiguous()?, op)
}
