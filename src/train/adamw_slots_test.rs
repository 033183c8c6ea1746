//! The optimizer's CUDA kernels (kernels/cuda/engine/optim.cu) on the CPU by emulation, against
//! the CPU's AdamW and sum of squares on the same values: several parameters in one launch, each
//! with its own size and decay (ragged against the grid, one larger than a turn of the grid),
//! three steps with changing scales; the sum of squares against f64's. A card then holds the
//! compiled kernels and adamw_cuda.rs's table to the same (its tests there).
use super::adamw_host::{adamw_chunk, Coefficients};
use crate::model::kernels::cuda::emulated::{emulator, Args};
use crate::model::kernels::cuda::Slot;
use crate::model::kernels::test_data;

/// Sizes of the parameters: below a block, ragged, past a turn of the grid (3 blocks x 64).
const SIZES: [usize; 4] = [5, 64, 200, 1000];

fn slots(w: &mut [Vec<f32>], g: &[Vec<f32>], m: &mut [Vec<f32>], v: &mut [Vec<f32>]) -> Vec<Slot> {
    (0..w.len())
        .map(|k| {
            let at = |p: *const f32| p as u64;
            let decay = if k % 2 == 0 { 0.999 } else { 1.0 };
            Slot::new(
                [
                    at(w[k].as_mut_ptr()),
                    at(g[k].as_ptr()),
                    at(m[k].as_mut_ptr()),
                    at(v[k].as_mut_ptr()),
                ],
                w[k].len(),
                decay,
            )
        })
        .collect()
}

#[test]
fn adamw_over_slots_matches_the_cpu() {
    let e = match emulator() {
        Ok(e) => e,
        Err(why) => return crate::runtime::skipped("the emulated AdamW kernel", "cxx", &why),
    };
    let values = |seed: u32| -> Vec<Vec<f32>> {
        SIZES
            .iter()
            .enumerate()
            .map(|(k, &n)| test_data(n, seed + k as u32))
            .collect()
    };
    let (mut w, mut m, mut v) = (values(1), vec![Vec::new(); 4], vec![Vec::new(); 4]);
    for k in 0..SIZES.len() {
        m[k] = vec![0.0; SIZES[k]];
        v[k] = vec![0.0; SIZES[k]];
    }
    let (mut cw, mut cm, mut cv) = (w.clone(), m.clone(), v.clone());
    for step in 0..3u32 {
        let g = values(10 * (step + 1));
        let c = Coefficients {
            scale: 0.5 / (step + 1) as f32,
            c1: 0.1,
            b2: 0.999,
            c2: 1.0 - 0.999,
            decay: 1.0,
            step_size: 1e-2 / (1.0 - 0.9f32.powi(step as i32 + 1)),
            bc2_sqrt: (1.0 - 0.999f32.powi(step as i32 + 1)).sqrt(),
            eps: 1e-8,
        };
        let table = slots(&mut w, &g, &mut m, &mut v);
        let args = Args::default()
            .inp(Some(Slot::bytes(&table)))
            .arg(c.scale)
            .arg(c.c1)
            .arg(c.b2)
            .arg(c.c2)
            .arg(c.step_size)
            .arg(c.bc2_sqrt)
            .arg(c.eps);
        e.launch("adamw_slots", (3, table.len() as u32), 64, args);
        for k in 0..SIZES.len() {
            let ck = Coefficients {
                decay: table[k].decay,
                ..c
            };
            adamw_chunk(&mut cw[k], &g[k], &mut cm[k], &mut cv[k], &ck);
        }
        for (what, got, want) in [("w", &w, &cw), ("m", &m, &cm), ("v", &v, &cv)] {
            for k in 0..SIZES.len() {
                let worst = got[k]
                    .iter()
                    .zip(&want[k])
                    .map(|(a, b)| (a - b).abs())
                    .fold(0f32, f32::max);
                assert!(
                    worst <= 1e-6,
                    "step {step}: {what} of parameter {k} off by {worst}"
                );
            }
        }
    }
}

#[test]
fn sum_of_squares_over_slots_matches_f64() {
    let e = match emulator() {
        Ok(e) => e,
        Err(why) => return crate::runtime::skipped("the emulated norm kernels", "cxx", &why),
    };
    let g: Vec<Vec<f32>> = SIZES
        .iter()
        .enumerate()
        .map(|(k, &n)| test_data(n, 40 + k as u32))
        .collect();
    let table: Vec<Slot> = g
        .iter()
        .map(|x| Slot::new([0, x.as_ptr() as u64, 0, 0], x.len(), 1.0))
        .collect();
    let parts = 3;
    let mut partial = vec![f32::NAN; parts * table.len()];
    let args = Args::default()
        .inp(Some(Slot::bytes(&table)))
        .out(&mut partial);
    e.launch(
        "sum_squares_slots",
        (parts as u32, table.len() as u32),
        256,
        args,
    );
    let mut out = [f32::NAN];
    let args = Args::default()
        .inp(Some(&partial[..]))
        .arg(partial.len() as u64)
        .out(&mut out);
    e.launch("sum_all", (1, 1), 256, args);
    let want: f64 = g.iter().flatten().map(|&x| x as f64 * x as f64).sum();
    assert!(
        (out[0] as f64 - want).abs() <= 1e-5 * want,
        "{} against {want}",
        out[0]
    );
    // each slot's partials are its own: slot 0's alone sum to its squares
    let first: f64 = partial[..parts].iter().map(|&p| p as f64).sum();
    let want0: f64 = g[0].iter().map(|&x| x as f64 * x as f64).sum();
    assert!(
        (first - want0).abs() <= 1e-5 * want0,
        "slot 0: {first} against {want0}"
    );
}
