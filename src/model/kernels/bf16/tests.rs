//! The bf16 GEMM against the f32 reference (skipped, said, on a CPU without AVX512-BF16).
use super::*;

fn lcg(seed: &mut u64) -> f32 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    ((*seed >> 40) as f32 / (1u64 << 24) as f32) - 0.5
}

/// The exact product of the bf16-rounded operands, in f64.
fn reference(a: MatRef, b: MatRef, m: usize, n: usize, k: usize) -> Vec<f64> {
    let r = |v: f32| from_bf16(to_bf16(v)) as f64;
    let mut c = vec![0f64; m * n];
    for i in 0..m {
        for j in 0..n {
            c[i * n + j] = (0..k).map(|d| r(a.at(i, d)) * r(b.at(d, j))).sum();
        }
    }
    c
}

const NO_BF16: &str = "this CPU has no AVX512-BF16 (the kernel's instruction); the packing and \
    rounding tests still ran";

/// The packed layout holds every element of B, rounded, where the kernel reads it: [panel]
/// [k-pair][column in panel] words of two halves, zero past k and past n, whether B is given
/// transposed (a weight), in rows, or with neither stride 1 (copied first). Runs on every CPU.
#[test]
fn packing_places_every_rounded_element() {
    let mut seed = 3;
    for &(k, n) in &[(1, 1), (7, 33), (64, 70), (385, 24)] {
        let wv: Vec<f32> = (0..2 * n * k).map(|_| lcg(&mut seed)).collect();
        let views = [
            MatRef::transposed(&wv, k),
            MatRef::rows(&wv, n),
            MatRef {
                data: &wv,
                rs: 2 * n,
                cs: 2,
            },
        ];
        for (v, b) in views.into_iter().enumerate() {
            let p = PackedB::pack(b, k, n);
            let pairs = k.div_ceil(2);
            assert_eq!(p.data.words().len(), n.div_ceil(NR) * pairs * NR);
            for (i, &w) in p.data.words().iter().enumerate() {
                let (panel, rest) = (i / (pairs * NR), i % (pairs * NR));
                let (pair, col) = (rest / NR, panel * NR + rest % NR);
                for (half, h) in [w as u16, (w >> 16) as u16].into_iter().enumerate() {
                    let d = pair * 2 + half;
                    let want = if d < k && col < n {
                        to_bf16(b.at(d, col))
                    } else {
                        0
                    };
                    assert_eq!(
                        h, want,
                        "view {v} k {k} n {n}: word {i} (row {d}, column {col})"
                    );
                }
            }
        }
    }
}

#[test]
fn rounding_is_nearest_even() {
    assert_eq!(to_bf16(1.0), 0x3f80);
    // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1.0)
    assert_eq!(to_bf16(1.0 + 1.0 / 256.0), 0x3f80);
    assert_eq!(to_bf16(1.0 + 3.0 / 256.0), 0x3f82);
    assert!(from_bf16(to_bf16(f32::NAN)).is_nan());
    assert_eq!(from_bf16(to_bf16(f32::INFINITY)), f32::INFINITY);
    assert_eq!(from_bf16(to_bf16(-2.5)), -2.5);
}

#[test]
fn gemm_matches_the_rounded_product_on_every_edge() {
    if !supported() {
        crate::runtime::skipped("bf16 gemm edge shapes", "avx512bf16", NO_BF16);
        return;
    }
    let mut seed = 7;
    // odd k, partial tiles in both directions, k past one block, tiny and wide shapes
    for &(m, n, k) in &[
        (1, 1, 1),
        (13, 33, 7),
        (37, 50, 77),
        (100, 64, 385),
        (24, 1, 384),
        (5, 70, 800),
        (200, 40, 1537),
    ] {
        for trans_a in [false, true] {
            let av: Vec<f32> = (0..m * k).map(|_| lcg(&mut seed)).collect();
            let wv: Vec<f32> = (0..n * k).map(|_| lcg(&mut seed)).collect();
            let a = if trans_a {
                MatRef::transposed(&av, m)
            } else {
                MatRef::rows(&av, k)
            };
            let b = MatRef::transposed(&wv, k);
            let want = reference(a, b, m, n, k);
            let packed = PackedB::pack(b, k, n);
            let bias: Vec<f32> = (0..n).map(|j| j as f32 * 0.125 - 1.0).collect();
            // C starting at 0.25 added to (accumulate), overwritten, or a bias's start
            for start in ["accumulate", "overwrite", "bias"] {
                let mut c = vec![0.25f32; m * n];
                if start == "bias" {
                    // SAFETY: f32 and MaybeUninit<f32> share a layout; c stays initialised
                    let uninit =
                        unsafe { std::slice::from_raw_parts_mut(c.as_mut_ptr().cast(), c.len()) };
                    gemm_bias(a, m, &packed, &bias, uninit, n);
                } else {
                    gemm(a, m, &packed, &mut c, n, start == "accumulate");
                }
                for (i, (&g, &w)) in c.iter().zip(&want).enumerate() {
                    let w = w + match start {
                        "accumulate" => 0.25,
                        "bias" => bias[i % n] as f64,
                        _ => 0.0,
                    };
                    let tol = 1e-5 * (k as f64).sqrt() + 1e-6 * w.abs();
                    assert!(
                        (g as f64 - w).abs() < tol,
                        "{m}x{n}x{k} {start} at {i}: {g} vs {w}"
                    );
                }
            }
        }
    }
}

/// A thread reuses its A words from one product to the next: an odd k's unused last half
/// must not keep what a wider product left there (here a NaN, which zero B would not hide).
#[test]
fn odd_k_after_a_wider_product_ignores_its_leftovers() {
    if !supported() {
        crate::runtime::skipped("bf16 gemm after a wider product", "avx512bf16", NO_BF16);
        return;
    }
    let (m, n) = (20, 33);
    let nan = vec![f32::NAN; m * 8];
    let w8 = vec![0.5f32; n * 8];
    let mut c = vec![0f32; m * n];
    let wide = PackedB::weight(&w8, n, 8);
    gemm(MatRef::rows(&nan, 8), m, &wide, &mut c, n, false);
    assert!(c.iter().all(|v| v.is_nan()));
    let a: Vec<f32> = (0..m * 7).map(|i| (i % 5) as f32).collect();
    let w7 = vec![0.5f32; n * 7];
    gemm(
        MatRef::rows(&a, 7),
        m,
        &PackedB::weight(&w7, n, 7),
        &mut c,
        n,
        false,
    );
    for i in 0..m {
        let want: f32 = a[i * 7..i * 7 + 7].iter().sum::<f32>() * 0.5;
        assert!(c[i * n..i * n + n].iter().all(|&v| v == want), "row {i}");
    }
}

#[test]
fn wide_leading_dimension_leaves_other_columns_alone() {
    if !supported() {
        crate::runtime::skipped(
            "bf16 gemm with a wide leading dimension",
            "avx512bf16",
            NO_BF16,
        );
        return;
    }
    let (m, n, k, ldc) = (30, 40, 16, 50);
    let a: Vec<f32> = (0..m * k).map(|i| (i % 7) as f32).collect();
    let w: Vec<f32> = (0..n * k).map(|i| (i % 5) as f32).collect();
    let mut c = vec![-1f32; m * ldc];
    gemm(
        MatRef::rows(&a, k),
        m,
        &PackedB::weight(&w, n, k),
        &mut c,
        ldc,
        false,
    );
    let want = reference(MatRef::rows(&a, k), MatRef::transposed(&w, k), m, n, k);
    for i in 0..m {
        for j in 0..ldc {
            let g = c[i * ldc + j];
            if j < n {
                assert_eq!(g as f64, want[i * n + j]);
            } else {
                assert_eq!(g, -1.0);
            }
        }
    }
}

/// The AMX kernel (where this process may run it) and the AVX512-BF16 one give the rounded
/// product where k is whole tile steps of 16 pairs (BERT's widths, an odd k whose pairs are)
/// with partial strips in both directions, a single row, two k-blocks and a column-major A; each
/// start. Both sum bf16 pairs in f32, in different orders.
#[test]
fn amx_and_avx512_kernels_match_the_rounded_product() {
    if !supported() {
        crate::runtime::skipped("bf16 kernels on tile shapes", "avx512bf16", NO_BF16);
        return;
    }
    let amx = amx::usable();
    if !amx {
        crate::runtime::skipped(
            "the AMX bf16 kernel",
            "amx",
            "this CPU has no AMX-BF16 (or Linux refused the tile state)",
        );
    }
    let mut seed = 11;
    for &(m, n, k) in &[
        (1, 1, 32),
        (17, 16, 64),
        (31, 17, 384),
        (33, 70, 384),
        (200, 33, 1536),
        (64, 40, 3072),
        (40, 33, 31),
        (20, 24, 63),
    ] {
        let av: Vec<f32> = (0..m * k).map(|_| lcg(&mut seed)).collect();
        let wv: Vec<f32> = (0..n * k).map(|_| lcg(&mut seed)).collect();
        // odd k: the AMX tiles' last k-pair half is zero; k 63: A a column-major view (its
        // tiles converted an element at a time)
        let a = if k == 63 {
            MatRef::transposed(&av, m)
        } else {
            MatRef::rows(&av, k)
        };
        let b = MatRef::transposed(&wv, k);
        let want = reference(a, b, m, n, k);
        let packed = PackedB::pack(b, k, n);
        assert!(amx_fits(&packed));
        let bias: Vec<f32> = (0..n).map(|j| j as f32 * 0.125 - 1.0).collect();
        for use_amx in [false, true] {
            if use_amx && !amx {
                continue;
            }
            for start in ["accumulate", "overwrite", "bias"] {
                let mut c = vec![0.25f32; m * n];
                let out = Out(c.as_mut_ptr());
                let bias = (start == "bias").then_some(&bias[..]);
                run(a, m, &packed, bias, out, n, start == "accumulate", use_amx);
                for (i, (&g, &w)) in c.iter().zip(&want).enumerate() {
                    let w = w + match start {
                        "accumulate" => 0.25,
                        "bias" => bias.unwrap()[i % n] as f64,
                        _ => 0.0,
                    };
                    let tol = 1e-5 * (k as f64).sqrt() + 1e-6 * w.abs();
                    assert!(
                        (g as f64 - w).abs() < tol,
                        "{m}x{n}x{k} {start} amx {use_amx} at {i}: {g} vs {w}"
                    );
                }
            }
        }
    }
}
