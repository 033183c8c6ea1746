//! One BERT layer on a device, forward and backward, as ../cpu/layer.rs runs it on the CPU: the same
//! formulas and tape (8h + i floats a token), the products on the device's GEMM and everything
//! between on the CUDA kernels, eight launches forward and 18 to 22 backward (in f32; under
//! --precision bf16 each product's operands are rounded first: products.rs). The Linears'
//! biases ride in the kernels after their products (attention adds qkv's, the LayerNorms add
//! o's and the output's, GELU the intermediate's) and their gradients come from the kernels'
//! partial sums, so no launch is spent on a bias. Buffers come from the caller (`LayerTape`,
//! `Scratch`), allocated once for a row capacity and reused.
//!
//!   qkv = x Wqkv^T (+ bqkv)        ctx = attention(qkv)            ao = ctx Wo^T
//!   a   = LN1(drop(ao + bo) + x)  u = a Wi^T + bi                  f = gelu(u) Wd^T
//!   out = LN2(drop(f + bd) + a)
use super::buffers::{
    Dims, LayerAddrs, LayerParams, LayerTape, Rows, Scratch, ATT_THREADS, PARTS, ROW_WARPS, THREADS,
};
use super::device::{Addr, Arg, Device};
use super::products::Gemms;
use crate::model::engine::cpu::layer::Sites;
use crate::model::engine::gpu::kernels::KernelMask;
use candle_core::{bail, Result};

/// Blocks of a row kernel's forward over t rows: a warp a row.
pub(super) fn row_blocks(t: usize) -> u32 {
    (t as u32).div_ceil(ROW_WARPS)
}

/// Blocks of a row kernel's backward: PARTS at most, fewer for a short batch.
pub(super) fn parts(t: usize) -> usize {
    (t.div_ceil(ROW_WARPS as usize)).clamp(1, PARTS)
}

fn mask(m: &Option<crate::model::kernels::dropout_hash::Mask>) -> Arg {
    Arg::Mask(KernelMask::of(m.as_ref()))
}

/// grads[k] += the sum over `parts` rows of partial's columns k w .. (k + 1) w, rows `stride`
/// apart: one launch where the gradients lie end to end as the partials do, else one each.
pub(super) fn add_partials<D: Device>(
    dev: &D,
    partial: Addr,
    parts: usize,
    stride: usize,
    w: usize,
    grads: &[Addr],
) -> Result<()> {
    let contiguous = grads.windows(2).all(|g| g[1] == g[0] + (4 * w) as Addr);
    let runs: Vec<(usize, Addr, usize)> = if contiguous {
        vec![(0, grads[0], w * grads.len())]
    } else {
        grads
            .iter()
            .enumerate()
            .map(|(k, &g)| (k * w, g, w))
            .collect()
    };
    for (col, out, width) in runs {
        let args = [
            Arg::Addr(partial + (4 * col) as Addr),
            Arg::I32(parts as i32),
            Arg::I32(stride as i32),
            Arg::I32(width as i32),
            Arg::Addr(out),
        ];
        dev.launch(
            "column_sums",
            ((width as u32).div_ceil(THREADS), 1),
            THREADS,
            &args,
        )?;
    }
    Ok(())
}

/// The attention kernels' name suffix for this head width.
fn width(d: Dims) -> Result<usize> {
    match d.head_dim() {
        w @ (32 | 64) => Ok(w),
        w => bail!("gpu engine: attention heads of width {w} (gpu/kernels/ has 32 and 64)"),
    }
}

/// Forward of the layer on `tape.x`'s rows, keeping the tape; the output goes to `out`
/// (rows x hidden: the next layer's `x`, or the stack's output).
#[allow(clippy::too_many_arguments)]
pub fn forward<D: Device>(
    dev: &D,
    p: &LayerParams,
    d: Dims,
    r: &Rows,
    sites: &Sites,
    tape: &LayerTape<D>,
    s: &Scratch<D>,
    out: Addr,
) -> Result<()> {
    s.fits(r)?;
    if r.t > tape.rows {
        bail!(
            "gpu engine: a tape for {} rows, a batch of {}",
            tape.rows,
            r.t
        )
    }
    let (t, h, i) = (r.t, d.hidden, d.intermediate);
    let (w, wb, g) = (&p.w, p.bf16, Gemms::new(dev, p, s)?);
    g.product(
        tape.x.at(0),
        (w.wqkv, wb.map(|b| b.wqkv)),
        (t, 3 * h, h),
        tape.qkv.at(0),
    )?;
    let att = [
        Arg::Addr(tape.qkv.at(0)),
        Arg::Addr(w.bqkv),
        Arg::Addr(r.off),
        Arg::Addr(r.len),
        Arg::I32(d.heads as i32),
        Arg::F32(d.scale),
        mask(&sites.attention),
        Arg::Addr(r.row_ids),
        Arg::Addr(tape.ctx.at(0)),
        Arg::Addr(tape.lse.at(0)),
    ];
    let grid = (r.items as u32, d.heads as u32);
    dev.launch(
        &format!("attention_forward_{}", width(d)?),
        grid,
        ATT_THREADS,
        &att,
    )?;
    let ao = s.th.at(0);
    g.product(tape.ctx.at(0), (w.wo, wb.map(|b| b.wo)), (t, h, h), ao)?;
    let norm = |y: Addr,
                bias: Addr,
                res: Addr,
                m: Arg,
                g: Addr,
                b: Addr,
                eps: f32,
                o: Addr,
                xh: Addr,
                rs: Addr| {
        let args = [
            Arg::Addr(y),
            Arg::Addr(bias),
            Arg::Addr(res),
            m,
            Arg::Addr(r.row_ids),
            Arg::Addr(g),
            Arg::Addr(b),
            Arg::F32(eps),
            Arg::I32(t as i32),
            Arg::I32(h as i32),
            Arg::Addr(o),
            Arg::Addr(xh),
            Arg::Addr(rs),
        ];
        dev.launch("residual_norm", (row_blocks(t), 1), 32 * ROW_WARPS, &args)
    };
    let (a, x) = (tape.a.at(0), tape.x.at(0));
    let m1 = mask(&sites.attention_out);
    norm(
        ao,
        w.bo,
        x,
        m1,
        w.g1,
        w.b1,
        p.eps1,
        a,
        tape.xhat1.at(0),
        tape.rstd1.at(0),
    )?;
    g.product(a, (w.wi, wb.map(|b| b.wi)), (t, i, h), tape.u.at(0))?;
    bias_gelu(dev, tape.u.at(0), w.bi, s.ti.at(0), t, i)?;
    let f = s.th.at(0);
    g.product(s.ti.at(0), (w.wd, wb.map(|b| b.wd)), (t, h, i), f)?;
    let m2 = mask(&sites.ffn_out);
    norm(
        f,
        w.bd,
        a,
        m2,
        w.g2,
        w.b2,
        p.eps2,
        out,
        tape.xhat2.at(0),
        tape.rstd2.at(0),
    )
}

/// u += bias (where not 0) and g = gelu(u).
fn bias_gelu<D: Device>(dev: &D, u: Addr, bias: Addr, g: Addr, t: usize, i: usize) -> Result<()> {
    let blocks = ((t * i) as u32).div_ceil(THREADS).clamp(1, 4096);
    let args = [
        Arg::Addr(u),
        Arg::Addr(bias),
        Arg::Addr(g),
        Arg::I32(t as i32),
        Arg::I32(i as i32),
    ];
    dev.launch("bias_gelu", (blocks, 1), THREADS, &args)
}

/// From the output's gradient `dout`, accumulate the layer's gradients into `gr` and leave the
/// input's gradient in `s.dx()`. `dout` may be `s.dx()` itself (the layer above's result): only
/// the first kernel reads it.
#[allow(clippy::too_many_arguments)]
pub fn backward<D: Device>(
    dev: &D,
    p: &LayerParams,
    d: Dims,
    r: &Rows,
    sites: &Sites,
    tape: &LayerTape<D>,
    s: &Scratch<D>,
    dout: Addr,
    gr: &LayerAddrs,
) -> Result<()> {
    s.fits(r)?;
    let (t, h, i) = (r.t, d.hidden, d.intermediate);
    let (w, wb, gm) = (&p.w, p.bf16, Gemms::new(dev, p, s)?);
    let none = Arg::Mask(KernelMask::default());
    let (da, df, partial) = (s.da.at(0), s.df.at(0), s.partial.at(0));
    let norm_back = |dy: Addr, xh: Addr, rs: Addr, g: Addr, m: Arg, dz: Addr, dy_in: Addr| {
        let args = [
            Arg::Addr(dy),
            Arg::Addr(xh),
            Arg::Addr(rs),
            Arg::Addr(g),
            none,
            m,
            Arg::Addr(r.row_ids),
            Arg::I32(t as i32),
            Arg::I32(h as i32),
            Arg::Addr(dz),
            Arg::Addr(dy_in),
            Arg::Addr(partial),
        ];
        dev.launch(
            "residual_norm_backward",
            (parts(t) as u32, 1),
            32 * ROW_WARPS,
            &args,
        )
    };
    // out = LN2(drop(f + bd) + a): dz to a (the residual), dz * mask to f and bd
    let m2 = mask(&sites.ffn_out);
    norm_back(dout, tape.xhat2.at(0), tape.rstd2.at(0), w.g2, m2, da, df)?;
    add_partials(dev, partial, parts(t), 3 * h, h, &[gr.g2, gr.b2, gr.bd])?;
    // f = gelu(u) Wd^T: gelu(u) again (not kept), dWd, then du = df Wd through GELU's derivative
    let (g, du) = (s.ti.at(0), s.du.at(0));
    bias_gelu(dev, tape.u.at(0), 0, g, t, i)?;
    gm.backward(df, g, (w.wd, wb.map(|b| b.wd)), (t, h, i), gr.wd, du, false)?;
    let gparts = t.clamp(1, PARTS);
    let args = [
        Arg::Addr(tape.u.at(0)),
        Arg::Addr(du),
        Arg::I32(t as i32),
        Arg::I32(i as i32),
        Arg::Addr(partial),
    ];
    dev.launch("gelu_backward", (gparts as u32, 1), THREADS, &args)?;
    add_partials(dev, partial, gparts, i, i, &[gr.bi])?;
    // u = a Wi^T + bi; a also feeds the residual (da holds that part already)
    let wi = (w.wi, wb.map(|b| b.wi));
    gm.backward(du, tape.a.at(0), wi, (t, i, h), gr.wi, da, true)?;
    // a = LN1(drop(ao + bo) + x): dx gets the residual's part, dao (in df) the rest
    let (dx, dao) = (s.th.at(0), df);
    let m1 = mask(&sites.attention_out);
    norm_back(da, tape.xhat1.at(0), tape.rstd1.at(0), w.g1, m1, dx, dao)?;
    add_partials(dev, partial, parts(t), 3 * h, h, &[gr.g1, gr.b1, gr.bo])?;
    // ao = ctx Wo^T
    let dctx = s.dctx.at(0);
    let wo = (w.wo, wb.map(|b| b.wo));
    gm.backward(dao, tape.ctx.at(0), wo, (t, h, h), gr.wo, dctx, false)?;
    let dqkv = s.dqkv.at(0);
    let att = [
        Arg::Addr(tape.qkv.at(0)),
        Arg::Addr(tape.ctx.at(0)),
        Arg::Addr(tape.lse.at(0)),
        Arg::Addr(dctx),
        Arg::Addr(r.off),
        Arg::Addr(r.len),
        Arg::I32(d.heads as i32),
        Arg::F32(d.scale),
        mask(&sites.attention),
        Arg::Addr(r.row_ids),
        Arg::Addr(dqkv),
        Arg::Addr(partial),
    ];
    let grid = (r.items as u32, d.heads as u32);
    dev.launch(
        &format!("attention_backward_{}", width(d)?),
        grid,
        ATT_THREADS,
        &att,
    )?;
    add_partials(dev, partial, r.items, 3 * h, 3 * h, &[gr.bqkv])?;
    // qkv = x Wqkv^T + bqkv; x also feeds the residual (dx holds that part already)
    let wqkv = (w.wqkv, wb.map(|b| b.wqkv));
    gm.backward(dqkv, tape.x.at(0), wqkv, (t, 3 * h, h), gr.wqkv, dx, true)
}
