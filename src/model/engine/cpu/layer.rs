//! One BERT layer, forward and backward side by side, on packed rows (t tokens, hidden h,
//! intermediate i). What forward keeps for backward (`LayerTape`), per token: the input x (h),
//! qkv (3h), the attention context (h) and a log-sum-exp per head, the first LayerNorm's output a
//! and normalised input (2h), the GELU input u (i) and the second LayerNorm's normalised input (h):
//! 8h + i floats, 4.5 KB at MiniLM's sizes; no attention probabilities, no dropout masks (seeded,
//! regenerated), no GELU output (recomputed).
//!
//!   qkv = x Wqkv^T + bqkv          ctx = attention(qkv)           ao = ctx Wo^T + bo
//!   a   = LN1(drop(ao) + x)        u = a Wi^T + bi                 f = gelu(u) Wd^T + bd
//!   out = LN2(drop(f) + a)
use super::super::packed::Packed;
use super::super::weights::LayerW;
use super::gemm::Gemm;
use super::packed_attention::{self, Heads, Products};
use crate::model::kernels::dropout_hash::Mask;
use crate::model::kernels::gelu::{gelu_backward, gelu_in_place, gelu_into};
use crate::model::kernels::layer_norm::{norm_buffers, residual_norm, residual_norm_backward};
use crate::model::kernels::precision::Precision;
use crate::model::kernels::vector::add_column_sums;
use candle_core::Result;

/// The layer's three dropout sites (None: not dropped).
#[derive(Clone, Copy, Default)]
pub struct Sites {
    pub attention: Option<Mask>,
    pub attention_out: Option<Mask>,
    pub ffn_out: Option<Mask>,
}

pub struct LayerTape {
    pub x: Vec<f32>,
    qkv: Vec<f32>,
    ctx: Vec<f32>,
    lse: Vec<f32>,
    tail: TailTape,
}

/// A layer's gradients, accumulated: Wqkv (3h x h) and its bias as one, then as in `LayerW`.
pub struct LayerGrads {
    pub wqkv: Vec<f32>,
    pub bqkv: Vec<f32>,
    pub wo: Vec<f32>,
    pub bo: Vec<f32>,
    pub g1: Vec<f32>,
    pub b1: Vec<f32>,
    pub wi: Vec<f32>,
    pub bi: Vec<f32>,
    pub wd: Vec<f32>,
    pub bd: Vec<f32>,
    pub g2: Vec<f32>,
    pub b2: Vec<f32>,
}

impl LayerGrads {
    pub fn zeros(h: usize, i: usize) -> LayerGrads {
        let z = |n: usize| vec![0f32; n];
        LayerGrads {
            wqkv: z(3 * h * h),
            bqkv: z(3 * h),
            wo: z(h * h),
            bo: z(h),
            g1: z(h),
            b1: z(h),
            wi: z(i * h),
            bi: z(i),
            wd: z(h * i),
            bd: z(h),
            g2: z(h),
            b2: z(h),
        }
    }
}

/// Which forward a layer runs: inference, or training (with its tape for backward when `keep`;
/// without, GradCache's first pass, whose embeddings must equal the taped pass's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pass {
    Infer,
    Train { keep: bool },
}

impl Pass {
    pub fn keeps(self) -> bool {
        matches!(self, Pass::Train { keep: true })
    }
}

/// The layer's output for input `x` (t x h), and its tape when the pass keeps one.
pub fn forward(
    g: Gemm,
    w: &LayerW,
    x: Vec<f32>,
    p: &Packed,
    heads: Heads,
    sites: &Sites,
    pass: Pass,
) -> Result<(Vec<f32>, Option<LayerTape>)> {
    let keep = pass.keeps();
    let (t, h) = (p.rows(), w.g1.len());
    let qkv = match (&w.qkv, &w.packed) {
        // frozen weights made ready once as one (bf16, or f32 on condenser's kernel)
        (Some(pq), _) => g.linear(&x, &w.wqkv, &w.bqkv, Some(pq), (t, 3 * h, h))?,
        _ => g.linear(&x, &w.wqkv, &w.bqkv, None, (t, 3 * h, h))?,
    };
    let (mut ctx, mut lse) = (vec![0f32; t * h], vec![0f32; t * heads.heads]);
    // attention's products in bf16 in a bf16 inference only (`Products::Bf16`); training keeps
    // f32 attention in every pass, taped or not (docs/engine.md)
    let products = match (g.precision, pass) {
        (Precision::Bf16, Pass::Infer) => Products::Bf16,
        _ => Products::F32,
    };
    packed_attention::forward(
        g.blas,
        &qkv,
        p,
        heads,
        sites.attention.as_ref(),
        products,
        &mut ctx,
        &mut lse,
    )?;
    let (qkv, spare) = if keep {
        (Some(qkv), None)
    } else {
        (None, Some(qkv))
    };
    let (out, kept) = tail(g, w, &ctx, x, p.row_ids(), sites, keep, spare)?;
    let tape = kept.map(|(x, tail)| LayerTape {
        x,
        qkv: qkv.expect("kept with a tape"),
        ctx,
        lse,
        tail,
    });
    Ok((out, tape))
}

/// The layer's input and its tail's tape, as `tail` returns them when it keeps a tape.
type Kept = (Vec<f32>, TailTape);

/// What the layer's tail keeps for backward.
pub struct TailTape {
    a: Vec<f32>,
    xhat1: Vec<f32>,
    rstd1: Vec<f32>,
    u: Vec<f32>,
    xhat2: Vec<f32>,
    rstd2: Vec<f32>,
}

#[allow(clippy::too_many_arguments)]
/// The layer past attention, for the rows whose dropout identities are `rows` (one each):
/// ao = ctx Wo^T + bo, a = LN1(drop(ao) + x), u = a Wi^T + bi and
/// out = LN2(drop(gelu(u) Wd^T + bd) + a). The whole layer's forward and first_token.rs (the
/// last layer at each item's first row) both end here. `spare`: a dead buffer of at least
/// rows x h floats, which holds `a` when nothing is kept. Returns the output and, with `keep`,
/// the input x and the tape (`Kept`).
pub(super) fn tail(
    g: Gemm,
    w: &LayerW,
    ctx: &[f32],
    x: Vec<f32>,
    rows: &[u64],
    sites: &Sites,
    keep: bool,
    spare: Option<Vec<f32>>,
) -> Result<(Vec<f32>, Option<Kept>)> {
    let (t, h, i) = (rows.len(), w.g1.len(), w.bi.len());
    let pk = |j: usize| w.packed[j].as_deref();
    let ao = g.linear(ctx, w.wo, w.bo, pk(3), (t, h, h))?;
    // Without a tape the norms write into buffers that are dead by then (qkv's, then x's):
    // every element is written, so they need no zero-fill first (a fresh t x h buffer's memset
    // was ~1% of a 256-token encode: issue 35, Zen 3).
    let mut a = match spare {
        Some(mut reuse) if !keep => {
            reuse.truncate(t * h);
            reuse
        }
        _ => vec![0f32; t * h],
    };
    let (mut xhat1, mut rstd1) = norm_buffers(t, h, keep);
    let m1 = sites.attention_out.as_ref();
    residual_norm(
        &ao,
        Some(&x),
        m1,
        rows,
        w.g1,
        w.b1,
        w.eps1,
        &mut a,
        &mut xhat1,
        &mut rstd1,
    );
    drop(ao);
    let mut u = g.linear(&a, w.wi, w.bi, pk(4), (t, i, h))?;
    // with a tape u stays for backward and the GELU goes to a buffer; without, in place
    let gl = if keep {
        let mut gl = vec![0f32; t * i];
        gelu_into(&u, &mut gl);
        Some(gl)
    } else {
        gelu_in_place(&mut u);
        None
    };
    let f = g.linear(gl.as_ref().unwrap_or(&u), w.wd, w.bd, pk(5), (t, h, i))?;
    drop(gl);
    let (x, mut out) = if keep {
        (Some(x), vec![0f32; t * h])
    } else {
        (None, x)
    };
    let (mut xhat2, mut rstd2) = norm_buffers(t, h, keep);
    let m2 = sites.ffn_out.as_ref();
    residual_norm(
        &f,
        Some(&a),
        m2,
        rows,
        w.g2,
        w.b2,
        w.eps2,
        &mut out,
        &mut xhat2,
        &mut rstd2,
    );
    let kept = x.map(|x| {
        let tail = TailTape {
            a,
            xhat1,
            rstd1,
            u,
            xhat2,
            rstd2,
        };
        (x, tail)
    });
    Ok((out, kept))
}

#[allow(clippy::too_many_arguments)]
/// From the output's gradient `dout`, accumulate the layer's weight gradients into `gr` and
/// return the input's gradient.
pub fn backward(
    g: Gemm,
    w: &LayerW,
    tp: LayerTape,
    dout: &[f32],
    p: &Packed,
    heads: Heads,
    sites: &Sites,
    gr: &mut LayerGrads,
) -> Result<Vec<f32>> {
    let (t, h, i) = (p.rows(), w.g1.len(), w.bi.len());
    // out = LN2(drop(f) + a): dz2 flows to a (residual) and, through the mask, to f
    let (mut da, mut df) = (vec![0f32; t * h], vec![0f32; t * h]);
    let m2 = sites.ffn_out.as_ref();
    residual_norm_backward(
        dout,
        &tp.tail.xhat2,
        &tp.tail.rstd2,
        w.g2,
        m2,
        p.row_ids(),
        &mut da,
        Some(&mut df),
        &mut gr.g2,
        &mut gr.b2,
    );
    drop((tp.tail.xhat2, tp.tail.rstd2));
    // f = gelu(u) Wd^T + bd
    add_column_sums(&df, &mut gr.bd);
    let mut gl = vec![0f32; t * i];
    gelu_into(&tp.tail.u, &mut gl);
    g.weight_grad(&df, &gl, t, h, i, &mut gr.wd)?;
    let mut du = gl; // reused: d gelu(u), then du in place
    g.input_grad(&df, w.wd, t, h, i, &mut du, false)?;
    drop(df);
    gelu_backward(&tp.tail.u, &mut du);
    drop(tp.tail.u);
    // u = a Wi^T + bi; a also feeds the residual (da holds that part already)
    add_column_sums(&du, &mut gr.bi);
    g.weight_grad(&du, &tp.tail.a, t, i, h, &mut gr.wi)?;
    g.input_grad(&du, w.wi, t, i, h, &mut da, true)?;
    drop((du, tp.tail.a));
    // a = LN1(drop(ao) + x)
    let (mut dx, mut dao) = (vec![0f32; t * h], vec![0f32; t * h]);
    let m1 = sites.attention_out.as_ref();
    residual_norm_backward(
        &da,
        &tp.tail.xhat1,
        &tp.tail.rstd1,
        w.g1,
        m1,
        p.row_ids(),
        &mut dx,
        Some(&mut dao),
        &mut gr.g1,
        &mut gr.b1,
    );
    drop((da, tp.tail.xhat1, tp.tail.rstd1));
    // ao = ctx Wo^T + bo
    add_column_sums(&dao, &mut gr.bo);
    g.weight_grad(&dao, &tp.ctx, t, h, h, &mut gr.wo)?;
    let mut dctx = vec![0f32; t * h];
    g.input_grad(&dao, w.wo, t, h, h, &mut dctx, false)?;
    drop(dao);
    let mut dqkv = vec![0f32; t * 3 * h];
    packed_attention::backward(
        g.blas,
        &tp.qkv,
        &tp.ctx,
        &tp.lse,
        &dctx,
        p,
        heads,
        sites.attention.as_ref(),
        &mut dqkv,
    )?;
    drop((dctx, tp.qkv, tp.ctx, tp.lse));
    // qkv = x Wqkv^T + bqkv; x also feeds the residual (dx holds that part already)
    add_column_sums(&dqkv, &mut gr.bqkv);
    g.weight_grad(&dqkv, &tp.x, t, 3 * h, h, &mut gr.wqkv)?;
    g.input_grad(&dqkv, &w.wqkv, t, 3 * h, h, &mut dx, true)?;
    Ok(dx)
}
