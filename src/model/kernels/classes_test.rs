//! The row kernels compiled per CPU class agree with their baseline copies bit for bit.
use super::dropout_hash::{dropout_row, row_id, Mask};
use super::gelu::{gelu_backward, gelu_in_place, gelu_into};
use super::isa::{detected, Isa};
use super::layer_norm::{residual_norm, residual_norm_backward};
use super::test_data as data;
use super::vector::add_column_sums;

/// Every copy of every row kernel this CPU can run gives the baseline copy's floats exactly
/// (same operations in the same order, only wider registers); a class the CPU lacks is named.
#[test]
fn every_cpu_class_equals_the_baseline_bit_for_bit() {
    let (rows, h) = (7, 384);
    let (a, res, g, b) = (data(rows * h, 1), data(rows * h, 2), data(h, 3), data(h, 4));
    let mask = Mask::new(42, 0.1);
    let ids: Vec<u64> = (0..rows as u64).map(|r| row_id(9, r as usize)).collect();
    let run = |isa: Isa| {
        let (mut out, mut xhat, mut rstd) =
            (vec![0f32; rows * h], vec![0f32; rows * h], vec![0f32; rows]);
        residual_norm::at(
            isa,
            &a,
            Some(&res),
            mask.as_ref(),
            &ids,
            &g,
            &b,
            1e-12,
            &mut out,
            &mut xhat,
            &mut rstd,
        );
        let (mut dz, mut da, mut dg, mut db) = (
            vec![0f32; rows * h],
            vec![0f32; rows * h],
            vec![0f32; h],
            vec![0f32; h],
        );
        residual_norm_backward::at(
            isa,
            &res,
            &xhat,
            &rstd,
            &g,
            mask.as_ref(),
            &ids,
            &mut dz,
            Some(&mut da),
            &mut dg,
            &mut db,
        );
        let mut gl = vec![0f32; rows * h];
        gelu_into::at(isa, &a, &mut gl);
        let mut gi = a.clone();
        gelu_in_place::at(isa, &mut gi);
        assert_eq!(gi, gl, "gelu in place equals gelu into a buffer");
        let mut dgl = res.clone();
        gelu_backward::at(isa, &a, &mut dgl);
        let mut cs = vec![0f32; h];
        add_column_sums::at(isa, &a, &mut cs);
        let mut dr = a.clone();
        dropout_row::at(isa, mask.as_ref().unwrap(), 9, &mut dr);
        [out, xhat, rstd, dz, da, dg, db, gl, dgl, cs, dr]
    };
    let base = run(Isa::Baseline);
    for isa in [Isa::Avx2, Isa::Avx512] {
        if detected() < isa {
            crate::runtime::skipped(
                &format!("row kernels at {}", isa.name()),
                isa.tag(),
                &format!("this CPU's widest class is {}", detected().name()),
            );
            continue;
        }
        for (k, (x, y)) in run(isa).iter().zip(&base).enumerate() {
            assert!(
                x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits()),
                "{} output {k}",
                isa.name()
            );
        }
    }
}
