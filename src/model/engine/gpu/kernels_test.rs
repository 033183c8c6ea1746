//! The GPU engine's row kernels (engine/gpu/kernels/rows.cu), run on the CPU by emulation,
//! against the CPU engine's own functions on the same inputs: LayerNorms with the residual, bias
//! and dropout folded in, the embeddings with their scatter, and GELU, forward and backward,
//! with and without dropout, their gradients' partial sums included (attention:
//! attention_test.rs). Agreement is
//! to f32 rounding (the sums run in another order); a GPU then holds the compiled kernels to the
//! same (docs/gpu.md).
use super::assert_close as close;
use super::buffers::ROW_WARPS;
use super::layer::row_blocks;
use super::workspace::scatter_plan;
use crate::model::engine::cpu::embeddings::{self, EmbGrads};
use crate::model::engine::gpu::kernels::emulated::{emulator, kernels_in_source, Args, Emulator};
use crate::model::engine::gpu::kernels::KernelMask;
use crate::model::engine::packed::Packed;
use crate::model::engine::weights::EmbW;
use crate::model::kernels::dropout_hash::Mask;
use crate::model::kernels::gelu::{gelu_backward, gelu_into};
use crate::model::kernels::layer_norm::{norm_buffers, residual_norm, residual_norm_backward};
use crate::model::kernels::test_data;
use crate::model::kernels::vector::add_column_sums;

pub(super) fn emu() -> Option<&'static Emulator> {
    match emulator() {
        Ok(e) => Some(e),
        Err(why) => {
            crate::runtime::skipped("the emulated CUDA kernels", "cxx", &why);
            None
        }
    }
}

/// `x` (rows x w) plus `bias` on every row.
pub(super) fn plus_bias(x: &[f32], bias: &[f32]) -> Vec<f32> {
    let mut y = x.to_vec();
    for row in y.chunks_exact_mut(bias.len()) {
        row.iter_mut().zip(bias).for_each(|(a, b)| *a += b);
    }
    y
}

pub(super) fn masks() -> [Option<Mask>; 2] {
    [None, Mask::new(0x5eed, 0.1)]
}

/// `out += sum of partial's rows` over columns 0..width (rows `stride` apart) by `column_sums`.
pub(super) fn sum_partials(
    e: &Emulator,
    partial: &[f32],
    parts: usize,
    stride: usize,
    out: &mut [f32],
) {
    let width = out.len();
    let args = Args::default()
        .inp(Some(partial))
        .arg(parts as i32)
        .arg(stride as i32)
        .arg(width as i32)
        .out(out);
    e.launch("column_sums", ((width as u32).div_ceil(128), 1), 128, args);
}

#[test]
fn every_kernel_of_the_source_is_emulated() {
    let Some(e) = emu() else { return };
    let (mut have, mut want) = (e.kernels(), kernels_in_source());
    have.sort();
    want.sort();
    assert_eq!(have, want, "emulate.cpp's KERNELS list against engine/");
}

/// residual_norm and its backward against layer_norm.rs on the bias-added input: h = 80 (a
/// lane's last value past the row for half the lanes), 45 rows, three blocks of partial sums.
#[test]
fn layer_norms_match_the_cpu_engine() {
    let Some(e) = emu() else { return };
    let (t, h, eps) = (45usize, 80usize, 1e-12f32);
    let p = Packed::new(vec![20, 25], &[11, 12]).unwrap();
    let (y, bias, res) = (test_data(t * h, 1), test_data(h, 2), test_data(t * h, 3));
    let gamma: Vec<f32> = test_data(h, 4).iter().map(|v| 1.0 + 0.5 * v).collect();
    let beta = test_data(h, 5);
    let dy = test_data(t * h, 6);
    for mask in masks() {
        let m = mask.as_ref();
        let (mut out, (mut xhat, mut rstd)) = (vec![0f32; t * h], norm_buffers(t, h, true));
        let a = plus_bias(&y, &bias);
        residual_norm(
            &a,
            Some(&res),
            m,
            p.row_ids(),
            &gamma,
            &beta,
            eps,
            &mut out,
            &mut xhat,
            &mut rstd,
        );
        let (mut gout, mut gxhat, mut grstd) =
            (vec![0f32; t * h], vec![0f32; t * h], vec![0f32; t]);
        let args = Args::default()
            .inp(Some(&y))
            .inp(Some(&bias))
            .inp(Some(&res))
            .arg(KernelMask::of(m))
            .inp(Some(p.row_ids()))
            .inp(Some(&gamma))
            .inp(Some(&beta))
            .arg(eps)
            .arg(t as i32)
            .arg(h as i32)
            .out(&mut gout)
            .out(&mut gxhat)
            .out(&mut grstd);
        e.launch("residual_norm", (row_blocks(t), 1), 32 * ROW_WARPS, args);
        close("LayerNorm output", &gout, &out, 1e-5);
        close("xhat", &gxhat, &xhat, 1e-5);
        close("1/std", &grstd, &rstd, 1e-5);

        // backward, into gradients that already hold something (they accumulate)
        let start = test_data(3 * h, 7);
        let (mut dz, mut da) = (vec![0f32; t * h], vec![0f32; t * h]);
        let (mut dg, mut db, mut dbias) = (
            start[..h].to_vec(),
            start[h..2 * h].to_vec(),
            start[2 * h..].to_vec(),
        );
        residual_norm_backward(
            &dy,
            &xhat,
            &rstd,
            &gamma,
            m,
            p.row_ids(),
            &mut dz,
            Some(&mut da),
            &mut dg,
            &mut db,
        );
        add_column_sums(&da, &mut dbias);
        let blocks = 3usize;
        let (mut gdz, mut gda, mut partial) = (
            vec![0f32; t * h],
            vec![0f32; t * h],
            vec![0f32; blocks * 3 * h],
        );
        let args = Args::default()
            .inp(Some(&dy))
            .inp(Some(&xhat))
            .inp(Some(&rstd))
            .inp(Some(&gamma))
            .arg(KernelMask::of(None))
            .arg(KernelMask::of(m))
            .inp(Some(p.row_ids()))
            .arg(t as i32)
            .arg(h as i32)
            .out(&mut gdz)
            .out(&mut gda)
            .out(&mut partial);
        e.launch(
            "residual_norm_backward",
            (blocks as u32, 1),
            32 * ROW_WARPS,
            args,
        );
        let mut sums = start.clone();
        for (k, part) in sums.chunks_exact_mut(h).enumerate() {
            sum_partials(e, &partial[k * h..], blocks, 3 * h, part);
        }
        close("dz", &gdz, &dz, 1e-5);
        close("d(dropped input)", &gda, &da, 1e-5);
        close("dgamma", &sums[..h], &dg, 1e-5);
        close("dbeta", &sums[h..2 * h], &db, 1e-5);
        close("dbias", &sums[2 * h..], &dbias, 1e-5);
    }
}

/// The embeddings forward (gather, LayerNorm, dropout) and backward (the dropout and LayerNorm
/// backward, the tables' rows summed by entry) against embeddings.rs, repeated tokens included.
#[test]
fn embeddings_match_the_cpu_engine() {
    let Some(e) = emu() else { return };
    let (h, vocab, positions, kinds, eps) = (80usize, 30usize, 64usize, 2usize, 1e-12f32);
    let lens = [20usize, 25, 3];
    let ids: Vec<Vec<u32>> = lens
        .iter()
        .enumerate()
        .map(|(i, &n)| (0..n).map(|j| ((7 * j + 3 * i) % vocab) as u32).collect())
        .collect();
    let types: Vec<Vec<u32>> = lens
        .iter()
        .map(|&n| (0..n).map(|j| (j >= n / 2) as u32).collect())
        .collect();
    let (word, pos, typ) = (
        test_data(vocab * h, 1),
        test_data(positions * h, 2),
        test_data(kinds * h, 3),
    );
    let gamma: Vec<f32> = test_data(h, 4).iter().map(|v| 1.0 + 0.5 * v).collect();
    let beta = test_data(h, 5);
    let w = EmbW {
        word: &word,
        pos: &pos,
        typ: &typ,
        g: &gamma,
        b: &beta,
        eps,
    };
    let id_refs: Vec<&[u32]> = ids.iter().map(Vec::as_slice).collect();
    let type_refs: Vec<&[u32]> = types.iter().map(Vec::as_slice).collect();
    let p = Packed::new(lens.to_vec(), &[21, 22, 23]).unwrap();
    let t = p.rows();
    // each row's token, position and type, as the host hands them over
    let flat = |v: &[Vec<u32>]| v.concat();
    let (row_tok, row_typ) = (flat(&ids), flat(&types));
    let row_pos: Vec<u32> = lens.iter().flat_map(|&n| 0..n as u32).collect();
    let dx = test_data(t * h, 6);
    for mask in masks() {
        let m = mask.as_ref();
        let (out, tape) = embeddings::forward(&w, &id_refs, Some(&type_refs), &p, m, true);
        let (mut gout, mut xhat, mut rstd) = (vec![0f32; t * h], vec![0f32; t * h], vec![0f32; t]);
        let args = Args::default()
            .inp(Some(&row_tok))
            .inp(Some(&row_pos))
            .inp(Some(&row_typ))
            .inp(Some(&word))
            .inp(Some(&pos))
            .inp(Some(&typ))
            .inp(Some(&gamma))
            .inp(Some(&beta))
            .arg(eps)
            .arg(KernelMask::of(m))
            .inp(Some(p.row_ids()))
            .arg(t as i32)
            .arg(h as i32)
            .out(&mut gout)
            .out(&mut xhat)
            .out(&mut rstd);
        e.launch("embed_forward", (row_blocks(t), 1), 32 * ROW_WARPS, args);
        close("embeddings", &gout, &out, 1e-5);

        let mut want = EmbGrads::zeros(&w);
        embeddings::backward(&w, tape.unwrap(), dx.clone(), &p, m, &mut want);
        let blocks = 2usize;
        let (mut de, mut partial) = (vec![0f32; t * h], vec![0f32; blocks * 2 * h]);
        let args = Args::default()
            .inp(Some(&dx))
            .inp(Some(&xhat))
            .inp(Some(&rstd))
            .inp(Some(&gamma))
            .arg(KernelMask::of(m))
            .arg(KernelMask::of(None))
            .inp(Some(p.row_ids()))
            .arg(t as i32)
            .arg(h as i32)
            .out(&mut de)
            .inp::<f32>(None)
            .out(&mut partial);
        e.launch(
            "residual_norm_backward",
            (blocks as u32, 1),
            32 * ROW_WARPS,
            args,
        );
        let (mut dg, mut db) = (vec![0f32; h], vec![0f32; h]);
        sum_partials(e, &partial, blocks, 2 * h, &mut dg);
        sum_partials(e, &partial[h..], blocks, 2 * h, &mut db);
        close("dgamma", &dg, &want.g, 1e-5);
        close("dbeta", &db, &want.b, 1e-5);
        for (name, keys, rows, mut table) in [
            ("word", &row_tok, vocab, vec![0f32; vocab * h]),
            ("position", &row_pos, positions, vec![0f32; positions * h]),
            ("type", &row_typ, kinds, vec![0f32; kinds * h]),
        ] {
            // the rows grouped by table row, in row order within a group (the stack's plan)
            let (index, start, order) = scatter_plan(keys);
            assert!(index.iter().all(|&k| (k as usize) < rows));
            let entries = index.len();
            let args = Args::default()
                .inp(Some(&index))
                .inp(Some(&start))
                .inp(Some(&order))
                .arg(entries as i32)
                .inp(Some(&de))
                .arg(h as i32)
                .out(&mut table);
            e.launch("embed_scatter", (entries as u32, 1), 64, args);
            let want_table = match name {
                "word" => &want.word,
                "position" => &want.pos,
                _ => &want.typ,
            };
            close(name, &table, want_table, 1e-5);
        }
    }
}

/// bias + GELU forward (kept and in place) and GELU's backward with the bias's gradient, against
/// gelu.rs: 45 rows of 200, four blocks of partial sums.
#[test]
fn gelu_matches_the_cpu_engine() {
    let Some(e) = emu() else { return };
    let (t, i) = (45usize, 200usize);
    let u: Vec<f32> = test_data(t * i, 1).iter().map(|v| 4.0 * v).collect();
    let bias = test_data(i, 2);
    let ub = plus_bias(&u, &bias);
    let mut g = vec![0f32; t * i];
    gelu_into(&ub, &mut g);
    let (mut gu, mut gg) = (u.clone(), vec![0f32; t * i]);
    let args = Args::default()
        .out(&mut gu)
        .inp(Some(&bias))
        .out(&mut gg)
        .arg(t as i32)
        .arg(i as i32);
    e.launch("bias_gelu", (8, 1), 128, args);
    close("u + bias", &gu, &ub, 1e-6);
    close("gelu", &gg, &g, 1e-6);
    let mut inplace = u.clone();
    let args = Args::default()
        .out(&mut inplace)
        .inp(Some(&bias))
        .inp::<f32>(None)
        .arg(t as i32)
        .arg(i as i32);
    e.launch("bias_gelu", (8, 1), 128, args);
    close("gelu in place", &inplace, &g, 1e-6);

    let d = test_data(t * i, 3);
    let (mut want, mut want_bias) = (d.clone(), test_data(i, 4));
    gelu_backward(&ub, &mut want);
    add_column_sums(&want, &mut want_bias);
    let blocks = 4usize;
    let (mut gd, mut partial, mut gbias) = (d.clone(), vec![0f32; blocks * i], test_data(i, 4));
    let args = Args::default()
        .inp(Some(&ub))
        .out(&mut gd)
        .arg(t as i32)
        .arg(i as i32)
        .out(&mut partial);
    e.launch("gelu_backward", (blocks as u32, 1), 128, args);
    sum_partials(e, &partial, blocks, i, &mut gbias);
    close("d gelu", &gd, &want, 1e-5);
    close("bias gradient", &gbias, &want_bias, 1e-5);
}

/// `to_bf16` (the bf16 products' operands) gives bf16/matrix.rs's bits exactly: ties to even
/// both ways, values that round up into the next exponent and to infinity, zeros, subnormals,
/// infinities and NaNs, then a spread of ordinary values; over several blocks of a grid-stride
/// loop (more values than threads); the padding past them zeros.
#[test]
fn to_bf16_rounds_as_the_cpu() {
    use crate::model::kernels::bf16::to_bf16;
    let Some(e) = emu() else { return };
    let mut x: Vec<f32> = [
        0x3f80_8000u32, // 1 + 2^-8: a tie, to even (down)
        0x3f81_8000,    // a tie, to even (up)
        0x3f80_7fff,    // just below a tie
        0x3fff_ffff,    // rounds up into the next exponent
        0x7f7f_ffff,    // the largest f32: to infinity
        0x8000_0000,    // -0
        0x0000_0001,    // the smallest subnormal
        0x807f_ffff,    // a negative subnormal
        0x7f80_0000,    // infinity
        0xff80_0000,    // -infinity
        0x7fc0_0001,    // a quiet NaN with payload
        0x7f80_0001,    // a signalling NaN: quiet after
    ]
    .map(f32::from_bits)
    .to_vec();
    x.extend(test_data(1000, 9).iter().map(|v| v * 37.0));
    let mut want: Vec<u16> = x.iter().map(|&v| to_bf16(v)).collect();
    // and 37 values past n, a padded product's rows: zeros
    let padded = x.len() + 37;
    want.resize(padded, 0);
    let mut got = vec![0xffffu16; padded];
    let args = Args::default()
        .inp(Some(&x))
        .out(&mut got)
        .arg(x.len() as i32)
        .arg(padded as i32);
    e.launch("to_bf16", (2, 1), 128, args);
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        let bits = x.get(k).map_or(0, |v| v.to_bits());
        assert_eq!(g, w, "value {k} ({bits:#010x})");
    }
}
