//! BERT's embeddings on packed rows: x = drop(LN(word[id] + position[p] + type[t])), and backward
//! scattering the gradient into the three tables (dense gradients, as PyTorch's nn.Embedding).
use super::super::packed::Packed;
use super::super::weights::EmbW;
use crate::model::kernels::dropout_hash::{dropout_row, Mask};
use crate::model::kernels::layer_norm::{norm_buffers, residual_norm, residual_norm_backward};
use crate::model::kernels::vector::add_into;

/// What forward keeps: each row's token, position and type, and the LayerNorm's xhat and 1/std.
pub struct EmbTape {
    rows: Vec<(u32, u32, u32)>,
    xhat: Vec<f32>,
    rstd: Vec<f32>,
}

pub struct EmbGrads {
    pub word: Vec<f32>,
    pub pos: Vec<f32>,
    pub typ: Vec<f32>,
    pub g: Vec<f32>,
    pub b: Vec<f32>,
}

impl EmbGrads {
    pub fn zeros(w: &EmbW) -> EmbGrads {
        EmbGrads {
            word: vec![0f32; w.word.len()],
            pos: vec![0f32; w.pos.len()],
            typ: vec![0f32; w.typ.len()],
            g: vec![0f32; w.g.len()],
            b: vec![0f32; w.b.len()],
        }
    }
}

/// Err unless every sequence fits the tables: token ids below the vocabulary, positions below
/// the position table, type ids below the type table, a type for every token.
pub fn check(w: &EmbW, ids: &[&[u32]], types: Option<&[&[u32]]>) -> candle_core::Result<()> {
    let h = w.g.len().max(1);
    check_tables(
        (w.word.len() / h, w.pos.len() / h, w.typ.len() / h),
        ids,
        types,
    )
}

/// `check` against tables of (vocabulary, positions, token types) rows.
pub fn check_tables(
    (vocab, positions, kinds): (usize, usize, usize),
    ids: &[&[u32]],
    types: Option<&[&[u32]]>,
) -> candle_core::Result<()> {
    for (i, seq) in ids.iter().enumerate() {
        if seq.len() > positions {
            candle_core::bail!(
                "engine: sequence {i} has {} tokens, the model {positions} positions",
                seq.len()
            );
        }
        if let Some(&id) = seq.iter().find(|&&id| id as usize >= vocab) {
            candle_core::bail!("engine: token id {id} in sequence {i}: the vocabulary has {vocab}");
        }
        if let Some(ts) = types {
            let t = ts.get(i).copied().unwrap_or_default();
            if t.len() != seq.len() {
                candle_core::bail!(
                    "engine: sequence {i} has {} tokens and {} types",
                    seq.len(),
                    t.len()
                );
            }
            if let Some(&k) = t.iter().find(|&&k| k as usize >= kinds) {
                candle_core::bail!("engine: token type {k} in sequence {i}: the model has {kinds}");
            }
        }
    }
    if types.is_some_and(|ts| ts.len() != ids.len()) {
        candle_core::bail!(
            "engine: token types for {} of {} sequences",
            types.map_or(0, |t| t.len()),
            ids.len()
        );
    }
    Ok(())
}

/// The embedded rows (t x h) of `ids` (and `types`, 0 where None), and the tape when `keep`.
pub fn forward(
    w: &EmbW,
    ids: &[&[u32]],
    types: Option<&[&[u32]]>,
    p: &Packed,
    mask: Option<&Mask>,
    keep: bool,
) -> (Vec<f32>, Option<EmbTape>) {
    let h = w.g.len();
    let t = p.rows();
    let mut e = vec![0f32; t * h];
    let mut index = Vec::with_capacity(t);
    for (i, seq) in ids.iter().enumerate() {
        for (pos, &id) in seq.iter().enumerate() {
            let typ = types.map_or(0, |ts| ts[i][pos]);
            let r = p.offsets()[i] + pos;
            let row = &mut e[r * h..(r + 1) * h];
            let (wd, pd, td) = (id as usize * h, pos * h, typ as usize * h);
            let (word, typ_row, pos_row) =
                (&w.word[wd..wd + h], &w.typ[td..td + h], &w.pos[pd..pd + h]);
            for (j, x) in row.iter_mut().enumerate() {
                *x = word[j] + typ_row[j] + pos_row[j];
            }
            index.push((id, pos as u32, typ));
        }
    }
    let mut out = vec![0f32; t * h];
    let (mut xhat, mut rstd) = norm_buffers(t, h, keep);
    residual_norm(
        &e,
        None,
        None,
        &[],
        w.g,
        w.b,
        w.eps,
        &mut out,
        &mut xhat,
        &mut rstd,
    );
    if let Some(m) = mask {
        for (&r, row) in p.row_ids().iter().zip(out.chunks_exact_mut(h)) {
            dropout_row(m, r, row);
        }
    }
    let tape = keep.then_some(EmbTape {
        rows: index,
        xhat,
        rstd,
    });
    (out, tape)
}

/// Accumulate the tables' and the LayerNorm's gradients from the output's gradient `dx`.
pub fn backward(
    w: &EmbW,
    tape: EmbTape,
    mut dx: Vec<f32>,
    p: &Packed,
    mask: Option<&Mask>,
    gr: &mut EmbGrads,
) {
    let h = w.g.len();
    if let Some(m) = mask {
        for (&r, row) in p.row_ids().iter().zip(dx.chunks_exact_mut(h)) {
            dropout_row(m, r, row);
        }
    }
    let mut de = vec![0f32; dx.len()];
    residual_norm_backward(
        &dx,
        &tape.xhat,
        &tape.rstd,
        w.g,
        None,
        &[],
        &mut de,
        None,
        &mut gr.g,
        &mut gr.b,
    );
    for (&(id, pos, typ), d) in tape.rows.iter().zip(de.chunks_exact(h)) {
        for (table, at) in [
            (&mut gr.word, id as usize * h),
            (&mut gr.pos, pos as usize * h),
            (&mut gr.typ, typ as usize * h),
        ] {
            add_into(&mut table[at..at + h], d);
        }
    }
}
