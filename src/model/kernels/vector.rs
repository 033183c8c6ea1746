//! Vector arithmetic over rows, compiled per CPU class (`dispatch!`): float sums, dots and maxima
//! in 16 independent lanes (the compiler may not reorder a float sum, so a plain loop stays
//! scalar; 16 lanes fill an AVX-512 register, two AVX2, four SSE2), and the engine's bias rows,
//! bias gradients (column sums) and gradient sums. The other row kernels live with their op:
//! layer_norm.rs, gelu.rs, softmax.rs, dropout_hash.rs.
use crate::dispatch;

pub(crate) const LANES: usize = 16;

#[inline(always)]
pub(crate) fn sum(x: &[f32]) -> f32 {
    let mut acc = [0f32; LANES];
    let mut chunks = x.chunks_exact(LANES);
    for c in &mut chunks {
        for (a, v) in acc.iter_mut().zip(c) {
            *a += v;
        }
    }
    let mut s: f32 = chunks.remainder().iter().sum();
    for a in acc {
        s += a;
    }
    s
}

#[inline(always)]
pub(crate) fn dot(x: &[f32], y: &[f32]) -> f32 {
    let mut acc = [0f32; LANES];
    let (cx, cy) = (x.chunks_exact(LANES), y.chunks_exact(LANES));
    let (rx, ry) = (cx.remainder(), cy.remainder());
    for (a, b) in cx.zip(cy) {
        for i in 0..LANES {
            acc[i] += a[i] * b[i];
        }
    }
    let mut s: f32 = rx.iter().zip(ry).map(|(a, b)| a * b).sum();
    for a in acc {
        s += a;
    }
    s
}

#[inline(always)]
pub(crate) fn max(x: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; LANES];
    let mut chunks = x.chunks_exact(LANES);
    for c in &mut chunks {
        for (a, v) in acc.iter_mut().zip(c) {
            *a = a.max(*v);
        }
    }
    let mut m = chunks
        .remainder()
        .iter()
        .fold(f32::NEG_INFINITY, |m, v| m.max(*v));
    for a in acc {
        m = m.max(a);
    }
    m
}

dispatch! {
    /// `acc[j] += sum over rows of d[r * n + j]` (a bias gradient).
    pub fn add_column_sums(d: &[f32], acc: &mut [f32]) {
        let n = acc.len();
        for row in d.chunks_exact(n) {
            for (a, v) in acc.iter_mut().zip(row) {
                *a += v;
            }
        }
    }
}

/// `rows` copies of the bias `b`, one a row: a GEMM then adds x W^T (beta 1). Built by copying,
/// not zero-filled first (at inference the zero-fill of the layer's buffers was 15% of a
/// 256-token encode: benches/README.md, issue 35).
pub fn bias_rows(b: &[f32], rows: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity(rows * b.len());
    for _ in 0..rows {
        out.extend_from_slice(b);
    }
    out
}

dispatch! {
    /// y += x.
    pub fn add_into(y: &mut [f32], x: &[f32]) {
        for (a, b) in y.iter_mut().zip(x) {
            *a += b;
        }
    }
}
