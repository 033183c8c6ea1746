//! The optimizer's CUDA kernels (engine/gpu/kernels/optim.cu) on the CPU by emulation, against
//! the CPU's AdamW and sum of squares on the same values: several parameters in one launch, each
//! with its own size and decay (ragged against the grid, one larger than a turn of the grid),
//! three steps with changing scales; the sum of squares against f64's. Then slots.rs itself (the
//! table, the addresses, the launches) on the emulated device, and on a GPU where one answers.
use super::host::{adamw_chunk, Coefficients};
use super::slots::{self, Table, Update};
use crate::model::engine::gpu::{emulator, Args, Emulated, Slot};
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

/// One step's coefficients as the tests take them (step 0, 1, 2: changing scales).
fn coefficients(step: u32) -> Coefficients {
    Coefficients {
        scale: 0.5 / (step + 1) as f32,
        c1: 0.1,
        b2: 0.999,
        c2: 1.0 - 0.999,
        decay: 1.0,
        step_size: 1e-2 / (1.0 - 0.9f32.powi(step as i32 + 1)),
        bc2_sqrt: (1.0 - 0.999f32.powi(step as i32 + 1)).sqrt(),
        eps: 1e-8,
    }
}

/// slots.rs's update and norm as the optimizer runs them on a GPU, here on the emulated device
/// (CPU tensors, the kernels compiled by g++): three steps of every parameter at once against
/// the host kernel, the table kept between steps; the norm against f64's.
#[test]
fn the_optimizers_launches_on_the_emulated_device_match_the_host() {
    let Some(dev) = Emulated::for_test("the optimizer on the emulated device") else {
        return;
    };
    let cpu = candle_core::Device::Cpu;
    let tensor = |v: &[f32]| candle_core::Tensor::from_slice(v, v.len(), &cpu).unwrap();
    let w0: Vec<Vec<f32>> = SIZES.iter().map(|&n| test_data(n, 7 + n as u32)).collect();
    let w: Vec<_> = w0.iter().map(|v| tensor(v)).collect();
    let m: Vec<_> = SIZES.iter().map(|&n| tensor(&vec![0.0; n])).collect();
    let v: Vec<_> = SIZES.iter().map(|&n| tensor(&vec![0.0; n])).collect();
    let (mut cw, mut cm, mut cv) = (
        w0.clone(),
        SIZES.map(|n| vec![0f32; n]).to_vec(),
        SIZES.map(|n| vec![0f32; n]).to_vec(),
    );
    let mut table = Table::default();
    for step in 0..3u32 {
        let g: Vec<Vec<f32>> = SIZES
            .iter()
            .map(|&n| test_data(n, 20 * (step + 1) + n as u32))
            .collect();
        let gt: Vec<_> = g.iter().map(|x| tensor(x)).collect();
        let c = coefficients(step);
        let ups: Vec<Update> = (0..SIZES.len())
            .map(|k| Update {
                w: &w[k],
                g: &gt[k],
                m: &m[k],
                v: &v[k],
                decay: if k % 2 == 0 { 0.999 } else { 1.0 },
            })
            .collect();
        slots::update(&dev, &mut table, &ups, &c).unwrap();
        for (k, up) in ups.iter().enumerate() {
            let ck = Coefficients {
                decay: up.decay,
                ..c
            };
            adamw_chunk(&mut cw[k], &g[k], &mut cm[k], &mut cv[k], &ck);
        }
        for (what, got, want) in [("w", &w, &cw), ("m", &m, &cm), ("v", &v, &cv)] {
            for k in 0..SIZES.len() {
                let got = got[k].to_vec1::<f32>().unwrap();
                let worst = got
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
        let sq = slots::sum_squares(&dev, &mut Table::default(), &gt).unwrap();
        let want: f64 = g.iter().flatten().map(|&x| x as f64 * x as f64).sum();
        assert!((sq - want).abs() <= 1e-5 * want, "{sq} against {want}");
    }
}

/// The same on a GPU, where one answers (a `cuda` build).
#[cfg(feature = "cuda")]
mod on_gpu {
    use super::super::slots::{sum_squares, Table};
    use crate::model::engine::gpu::Cuda;
    use crate::train::AdamW;
    use candle_core::{Device, Tensor, Var};

    /// Sums of squares whose values are exact in f32: 1..n ones (several blocks, ragged tails),
    /// two tensors at once, and 1 + 4 + 9.
    #[test]
    fn sum_squares_of_known_values() {
        let Ok(gpu) = Device::new_cuda(0) else {
            crate::runtime::skipped("a CUDA kernel", "gpu", "no CUDA device on this machine");
            return;
        };
        let Device::Cuda(cd) = &gpu else {
            unreachable!("made by new_cuda")
        };
        let (dev, mut room) = (Cuda::new(cd).unwrap(), Table::default());
        for n in [1usize, 3, 256, 257, 16384, 16385, 70001] {
            let ones = Tensor::ones(n, candle_core::DType::F32, &gpu).unwrap();
            let r = sum_squares(&dev, &mut room, std::slice::from_ref(&ones)).unwrap();
            let r2 = sum_squares(&dev, &mut room, &[ones.clone(), ones]).unwrap();
            assert_eq!(
                (r, r2),
                (n as f64, 2.0 * n as f64),
                "sum of squares of ones({n})"
            );
        }
        let t = Tensor::new(&[1f32, 2., 3.], &gpu).unwrap();
        assert_eq!(sum_squares(&dev, &mut room, &[t]).unwrap(), 14.0);
    }

    /// The one-launch update and norm against the CPU's (host kernel) on the same values, three
    /// steps with clipping-like scales and weight decay; skipped where no CUDA device answers.
    #[test]
    fn one_launch_update_matches_the_cpu() {
        let Ok(gpu) = Device::new_cuda(0) else {
            crate::runtime::skipped("a CUDA kernel", "gpu", "no CUDA device on this machine");
            return;
        };
        let cpu = Device::Cpu;
        let n = 70_001; // several blocks and a ragged tail
        let w0: Vec<f32> = (0..n)
            .map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0)
            .collect();
        let make = |d: &Device| {
            let w = Var::from_slice(&w0, n, d).unwrap();
            let b = Var::from_slice(&w0[..384], 384, d).unwrap();
            vec![("l.weight".to_string(), w), ("l.bias".to_string(), b)]
        };
        // tensor moments on the GPU (the one-launch route), host moments on the CPU
        let mut on_gpu = AdamW::with_tensor_moments(make(&gpu), 0.01).unwrap();
        let mut on_cpu = AdamW::new(make(&cpu), 0.01);
        for step in 0..3 {
            let g: Vec<f32> = (0..n)
                .map(|i| (((i + 31 * step) * 104_729) % 2001) as f32 / 1000.0 - 1.0)
                .collect();
            let grads = |d: &Device| {
                vec![
                    Some(Tensor::from_slice(&g, n, d).unwrap()),
                    Some(Tensor::from_slice(&g[..384], 384, d).unwrap()),
                ]
            };
            let (gg, gc) = (grads(&gpu), grads(&cpu));
            let (ng, nc) = (
                AdamW::grad_norm(&gg).unwrap(),
                AdamW::grad_norm(&gc).unwrap(),
            );
            let again = AdamW::grad_norm(&gg).unwrap();
            eprintln!("step {step}: norm {ng} on the GPU (again {again}), {nc} on the CPU");
            assert!(
                (ng - nc).abs() <= 1e-5 * nc,
                "norm {ng} on the GPU, {nc} on the CPU"
            );
            assert_eq!(ng, again, "the GPU norm is not repeatable");
            let scale = 0.5 / (step + 1) as f64;
            on_gpu.step(&gg, 1e-2, scale).unwrap();
            on_cpu.step(&gc, 1e-2, scale).unwrap();
        }
        for (a, b) in on_gpu.vars().iter().zip(on_cpu.vars()) {
            let a = a
                .as_tensor()
                .to_device(&cpu)
                .unwrap()
                .to_vec1::<f32>()
                .unwrap();
            let b = b.as_tensor().to_vec1::<f32>().unwrap();
            let worst = a
                .iter()
                .zip(&b)
                .map(|(x, y)| (x - y).abs())
                .fold(0f32, f32::max);
            eprintln!(
                "weights: worst difference {worst:e}; first {:?} vs {:?}",
                &a[..3],
                &b[..3]
            );
            assert!(worst <= 1e-6, "weights differ by {worst} after 3 steps");
        }
    }
}
