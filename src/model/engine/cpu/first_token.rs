//! The last layer at each item's first token alone, for heads that read nothing else (a
//! cross-encoder's classifier, CLS pooling). Its queries, attention output, FFN and LayerNorms
//! run for the one row an item; its attention reads every token, but needs no keys or values:
//! by associativity the first row's query is carried back through the key projection and the
//! probabilities forward through the value projection (below). A layer costs 12 h^2
//! multiply-adds a token (qkv 3, o 1, FFN 8 at i = 4h); the last one here 2 heads h a token plus
//! 12 h^2 an item, so a 6-layer model does ~16% fewer (sentence-transformers runs every row of
//! every layer).
//! Same formulas as layer.rs's forward, in inference: no dropout, no tape; past attention the
//! layer's own tail (`layer::tail`).
use super::super::packed::Packed;
use super::super::weights::LayerW;
use super::gemm::Gemm;
use super::layer::{self, Sites};
use super::packed_attention::Heads;
use crate::model::kernels::blas::{NO_TRANS, TRANS};
use crate::model::kernels::softmax;
use crate::model::kernels::vector::bias_rows;
use candle_core::Result;

/// Layer `w`'s output (items x h) at each item's first row, from its input `x` (rows x h).
pub fn forward(g: Gemm, w: &LayerW, x: &[f32], p: &Packed, heads: Heads) -> Result<Vec<f32>> {
    let h = w.g1.len();
    let n = p.lens().len();
    let pk = |j: usize| w.packed[j].as_deref();
    let first: Vec<u64> = p.offsets().iter().map(|&o| p.row_ids()[o]).collect();
    let xf = p.first_rows(x);
    let q = g.linear(&xf, &w.wqkv[..h * h], &w.bqkv[..h], pk(0), (n, h, h))?;
    let (hd, dh) = (heads.heads, heads.dim);
    let wk = |c: usize| &w.wqkv[(h + c) * h..];
    let wv = |c: usize| &w.wqkv[(2 * h + c) * h..];
    // no keys or values: a head's score of token j is q . (Wk x_j + bk) = (Wk^T q) . x_j + q . bk,
    // and the last term, the same for every j, leaves the softmax unchanged; so u = Wk^T q (h
    // wide, a head) is scored against the layer's input rows directly: heads x h multiply-adds
    // a token, where the keys cost h^2
    let mut u = vec![0f32; n * hd * h];
    for head in 0..hd {
        let c = head * dh;
        g.blas.gemm(
            NO_TRANS,
            NO_TRANS,
            n,
            h,
            dh,
            &q[c..],
            h,
            wk(c),
            h,
            0.0,
            &mut u[head * h..],
            hd * h,
        )?;
    }
    // y = sum_j p_j x_j a head; its context sum_j p_j (Wv x_j + bv) = Wv y + bv, since the
    // p_j sum to 1
    let mut y = vec![0f32; n * hd * h];
    let mut s = Vec::new();
    for (item, (&r0, &len)) in p.offsets().iter().zip(p.lens()).enumerate() {
        s.resize(hd * len, 0.0);
        let (ui, xi) = (&u[item * hd * h..], &x[r0 * h..(r0 + len) * h]);
        g.blas
            .gemm(NO_TRANS, TRANS, hd, len, h, ui, h, xi, h, 0.0, &mut s, len)?;
        for row in s.chunks_exact_mut(len) {
            softmax::softmax_row(row, heads.scale);
        }
        let yi = &mut y[item * hd * h..(item + 1) * hd * h];
        g.blas
            .gemm(NO_TRANS, NO_TRANS, hd, h, len, &s, len, xi, h, 0.0, yi, h)?;
    }
    let mut ctx = bias_rows(&w.bqkv[2 * h..], n);
    for head in 0..hd {
        let c = head * dh;
        g.blas.gemm(
            NO_TRANS,
            TRANS,
            n,
            dh,
            h,
            &y[head * h..],
            hd * h,
            wv(c),
            h,
            1.0,
            &mut ctx[c..],
            h,
        )?;
    }
    // the rest as in every layer, on the first rows alone (inference: no dropout, no tape)
    let (out, _) = layer::tail(g, w, &ctx, xf, &first, &Sites::default(), false, None)?;
    Ok(out)
}
