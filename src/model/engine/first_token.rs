//! The last layer at each item's first token alone, for heads that read nothing else (a
//! cross-encoder's classifier, CLS pooling). Its keys and values are needed for every token;
//! its queries, attention output, FFN and LayerNorms only for the one row an item. A layer costs
//! 12 h^2 multiply-adds a token (qkv 3, o 1, FFN 8 at i = 4h); the last one here 2 h^2 a token,
//! so a 6-layer model does 14% fewer (sentence-transformers runs every row of every layer).
//! Same formulas as layer.rs's forward, in inference: no dropout, no tape.
use super::gemm::Gemm;
use super::packed::Packed;
use super::packed_attention::Heads;
use super::weights::LayerW;
use crate::model::kernels::blas::{NO_TRANS, TRANS};
use crate::model::kernels::gelu::gelu_in_place;
use crate::model::kernels::layer_norm::{norm_buffers, residual_norm};
use crate::model::kernels::softmax;
use crate::model::kernels::vector::bias_rows;
use candle_core::Result;

/// Layer `w`'s output (items x h) at each item's first row, from its input `x` (rows x h).
pub fn forward(g: Gemm, w: &LayerW, x: &[f32], p: &Packed, heads: Heads) -> Result<Vec<f32>> {
    let (t, h, i) = (p.rows(), w.g1.len(), w.bi.len());
    let n = p.lens().len();
    let pk = |j: usize| w.packed.as_ref().map(|p| p[j].as_ref());
    // keys and values of every token: rows h..3h of Wqkv, into kv's two halves, one product
    // each (so that f32 and bf16, whose ready weights are per projection, run the same code)
    let mut kv = bias_rows(&w.bqkv[h..], t);
    for j in 0..2 {
        let part = &w.wqkv[(j + 1) * h * h..(j + 2) * h * h];
        g.forward(x, part, pk(j + 1), (t, h, h), &mut kv[j * h..], 2 * h)?;
    }
    let first: Vec<u64> = p.offsets().iter().map(|&o| p.row_ids()[o]).collect();
    let xf = p.first_rows(x);
    let mut q = bias_rows(&w.bqkv[..h], n);
    g.forward(&xf, &w.wqkv[..h * h], pk(0), (n, h, h), &mut q, h)?;
    let mut ctx = vec![0f32; n * h];
    let mut s = Vec::new();
    for (item, (&r0, &len)) in p.offsets().iter().zip(p.lens()).enumerate() {
        s.resize(len, 0.0);
        for head in 0..heads.heads {
            let c = head * heads.dim;
            let (k, v) = (&kv[r0 * 2 * h + c..], &kv[r0 * 2 * h + h + c..]);
            let qi = &q[item * h + c..item * h + c + heads.dim];
            g.blas.gemm(
                NO_TRANS,
                TRANS,
                1,
                len,
                heads.dim,
                qi,
                h,
                k,
                2 * h,
                0.0,
                &mut s,
                len,
            )?;
            softmax::softmax_row(&mut s, heads.scale);
            let out = &mut ctx[item * h + c..item * h + c + heads.dim];
            g.blas.gemm(
                NO_TRANS,
                NO_TRANS,
                1,
                heads.dim,
                len,
                &s,
                len,
                v,
                2 * h,
                0.0,
                out,
                heads.dim,
            )?;
        }
    }
    let mut ao = bias_rows(w.bo, n);
    g.forward(&ctx, w.wo, pk(3), (n, h, h), &mut ao, h)?;
    let mut a = vec![0f32; n * h];
    // inference only: nothing kept for backward
    let (mut xhat, mut rstd) = norm_buffers(n, h, false);
    residual_norm(
        &ao,
        Some(&xf),
        None,
        &first,
        w.g1,
        w.b1,
        w.eps1,
        &mut a,
        &mut xhat,
        &mut rstd,
    );
    let mut u = bias_rows(w.bi, n);
    g.forward(&a, w.wi, pk(4), (n, i, h), &mut u, i)?;
    gelu_in_place(&mut u);
    let mut f = bias_rows(w.bd, n);
    g.forward(&u, w.wd, pk(5), (n, h, i), &mut f, h)?;
    let mut out = vec![0f32; n * h];
    residual_norm(
        &f,
        Some(&a),
        None,
        &first,
        w.g2,
        w.b2,
        w.eps2,
        &mut out,
        &mut xhat,
        &mut rstd,
    );
    Ok(out)
}
