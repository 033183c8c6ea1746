//! The GPU engine's attention kernels (engine/gpu/kernels/attention.cu), run on the CPU by
//! emulation, against the CPU engine's packed attention on the same inputs, forward and backward,
//! with and without dropout (the row kernels: kernels_test.rs).
use super::assert_close as close;
use super::buffers::ATT_THREADS;
use super::kernels_test::{emu, masks, plus_bias, sum_partials};
use crate::model::engine::cpu::packed_attention::{self, Heads, Products};
use crate::model::engine::gpu::kernels::emulated::Args;
use crate::model::engine::gpu::kernels::KernelMask;
use crate::model::engine::packed::Packed;
use crate::model::kernels::test_data;
use crate::model::kernels::vector::add_column_sums;

/// Attention at head widths 32 and 64, with and without dropout, forward and backward, against
/// packed_attention.rs: items of 5, 70 (two turns of a block's 64 threads, three key chunks), 1
/// and 33 tokens; the bias folded into forward, its gradient from backward's partial sums.
#[test]
fn attention_matches_the_cpu_engine() {
    let Some(e) = emu() else { return };
    let Some(blas) = crate::model::kernels::blas::blas() else {
        crate::runtime::skipped("attention against the CPU engine", "blas", "no BLAS here");
        return;
    };
    let lens = vec![5usize, 70, 1, 33];
    let p = Packed::new(lens.clone(), &[31, 32, 33, 34]).unwrap();
    let t = p.rows();
    let off: Vec<i32> = p.offsets().iter().map(|&o| o as i32).collect();
    let len: Vec<i32> = lens.iter().map(|&n| n as i32).collect();
    for dim in [32usize, 64] {
        let heads = 2usize;
        let h = heads * dim;
        let a = Heads {
            heads,
            dim,
            scale: 1.0 / (dim as f32).sqrt(),
        };
        let qkv = test_data(t * 3 * h, dim as u32);
        let bias = test_data(3 * h, 2);
        let qkvb = plus_bias(&qkv, &bias);
        let dctx = test_data(t * h, 3);
        for mask in masks() {
            let m = mask.as_ref();
            let (mut ctx, mut lse) = (vec![0f32; t * h], vec![0f32; t * heads]);
            packed_attention::forward(blas, &qkvb, &p, a, m, Products::F32, &mut ctx, &mut lse)
                .unwrap();
            let (mut gqkv, mut gctx, mut glse) =
                (qkv.clone(), vec![0f32; t * h], vec![0f32; t * heads]);
            let args = Args::default()
                .out(&mut gqkv)
                .inp(Some(&bias))
                .inp(Some(&off))
                .inp(Some(&len))
                .arg(heads as i32)
                .arg(a.scale)
                .arg(KernelMask::of(m))
                .inp(Some(p.row_ids()))
                .out(&mut gctx)
                .out(&mut glse);
            let grid = (lens.len() as u32, heads as u32);
            e.launch(&format!("attention_forward_{dim}"), grid, ATT_THREADS, args);
            close("qkv + bias", &gqkv, &qkvb, 1e-6);
            close("context", &gctx, &ctx, 1e-5);
            close("log-sum-exp", &glse, &lse, 1e-5);

            let mut dqkv = vec![0f32; t * 3 * h];
            packed_attention::backward(blas, &qkvb, &ctx, &lse, &dctx, &p, a, m, &mut dqkv)
                .unwrap();
            let mut dbias = test_data(3 * h, 4);
            let mut want_bias = dbias.clone();
            add_column_sums(&dqkv, &mut want_bias);
            let (mut gd, mut partial) = (vec![0f32; t * 3 * h], vec![0f32; lens.len() * 3 * h]);
            let args = Args::default()
                .inp(Some(&gqkv))
                .inp(Some(&gctx))
                .inp(Some(&glse))
                .inp(Some(&dctx))
                .inp(Some(&off))
                .inp(Some(&len))
                .arg(heads as i32)
                .arg(a.scale)
                .arg(KernelMask::of(m))
                .inp(Some(p.row_ids()))
                .out(&mut gd)
                .out(&mut partial);
            e.launch(
                &format!("attention_backward_{dim}"),
                grid,
                ATT_THREADS,
                args,
            );
            sum_partials(e, &partial, lens.len(), 3 * h, &mut dbias);
            let what = format!("d{dim} qkv, mask {}", m.is_some());
            close(&what, &gd, &dqkv, 2e-5);
            close("qkv bias gradient", &dbias, &want_bias, 2e-5);
        }
    }
}
