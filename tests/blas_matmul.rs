//! The BLAS matmul op equals candle's matmul, forward and backward, on every layout the model
//! uses; where no BLAS loads, matmul() is candle's own.
mod common;
use candle_core::{Device, Tensor, Var};
use condenser::model::{kernels::blas::blas, matmul};

fn max_diff(a: &Tensor, b: &Tensor) -> f32 {
    condenser::model::max_abs_diff(a, b).unwrap()
}

/// The fast path is really taken: datasets/fetch.sh (which every test needs) unpacks OpenBLAS
/// and oneMKL, so a BLAS loads on every machine the tests run on, unless CONDENSER_BLAS turns it
/// off (0, off) on purpose.
#[test]
fn a_blas_loads_wherever_fetch_ran() {
    let lib = common::root().join("datasets/lib/libscipy_openblas.so");
    assert!(
        lib.exists(),
        "{} is missing: run datasets/fetch.sh",
        lib.display()
    );
    let off = matches!(std::env::var("CONDENSER_BLAS").as_deref(), Ok("0" | "off"));
    assert_eq!(
        blas().is_some(),
        !off,
        "CONDENSER_BLAS={:?}",
        std::env::var("CONDENSER_BLAS")
    );
}

#[test]
fn forward_and_backward_equal_candle_on_all_layouts() {
    let dev = Device::Cpu;
    let a = Var::from_tensor(&Tensor::randn(0f32, 1.0, (2, 3, 17, 32), &dev).unwrap()).unwrap();
    let b = Var::from_tensor(&Tensor::randn(0f32, 1.0, (2, 3, 32, 9), &dev).unwrap()).unwrap();
    let kt = Var::from_tensor(&Tensor::randn(0f32, 1.0, (2, 3, 9, 32), &dev).unwrap()).unwrap();
    let w = Var::from_tensor(&Tensor::randn(0f32, 1.0, (40, 32), &dev).unwrap()).unwrap();
    let x2 = Var::from_tensor(&Tensor::randn(0f32, 1.0, (50, 32), &dev).unwrap()).unwrap();
    // plain batched, transposed rhs (q k^T), transposed weight (x W^T), transposed lhs, narrowed
    let cases: Vec<(Tensor, Tensor)> = vec![
        (a.as_tensor().clone(), b.as_tensor().clone()),
        (a.as_tensor().clone(), kt.as_tensor().t().unwrap()),
        (x2.as_tensor().clone(), w.as_tensor().t().unwrap()),
        (x2.as_tensor().t().unwrap(), x2.as_tensor().clone()),
        (
            a.as_tensor().narrow(2, 1, 10).unwrap(),
            b.as_tensor().clone(),
        ),
        (
            a.as_tensor()
                .transpose(1, 2)
                .unwrap()
                .contiguous()
                .unwrap()
                .transpose(1, 2)
                .unwrap(),
            b.as_tensor().clone(),
        ),
    ];
    for (i, (l, r)) in cases.iter().enumerate() {
        let ours = matmul(l, r).unwrap();
        let theirs = l
            .contiguous()
            .unwrap()
            .matmul(&r.contiguous().unwrap())
            .unwrap();
        assert_eq!(ours.dims(), theirs.dims());
        assert!(max_diff(&ours, &theirs) < 1e-4, "case {i} forward");
        let g1 = (ours.sqr().unwrap().sum_all().unwrap()).backward().unwrap();
        let g2 = (theirs.sqr().unwrap().sum_all().unwrap())
            .backward()
            .unwrap();
        for v in [&a, &b, &kt, &w, &x2] {
            match (g1.get(v), g2.get(v)) {
                (Some(x), Some(y)) => assert!(
                    max_diff(x, y)
                        < 1e-3
                            * (1.0
                                + y.abs()
                                    .unwrap()
                                    .max_keepdim(0)
                                    .unwrap()
                                    .flatten_all()
                                    .unwrap()
                                    .max(0)
                                    .unwrap()
                                    .to_scalar::<f32>()
                                    .unwrap()),
                    "case {i} grad"
                ),
                (None, None) => {}
                _ => panic!("case {i}: gradient present on one side only"),
            }
        }
    }
}

/// An empty dimension is an error naming the shapes (it used to underflow `m - 1`), and so are a
/// buffer too small for the shapes, a leading dimension shorter than its row, and a size past
/// the BLAS's 32-bit ints (cast with `as i32` before).
#[test]
fn empty_or_short_operands_are_errors() {
    let Some(b) = blas() else {
        condenser::runtime::skipped(
            "gemm operand checks",
            "blas",
            "no BLAS library loaded (run datasets/fetch.sh)",
        );
        return;
    };
    use condenser::model::kernels::blas::{NO_TRANS, TRANS};
    let (x, mut c) = (vec![1f32; 12], vec![0f32; 16]);
    let e = b
        .sgemm(NO_TRANS, NO_TRANS, 0, 4, 3, &x, 3, &x, 4, &mut c)
        .unwrap_err();
    assert!(e.to_string().contains("empty matrix"), "{e}");
    let e = b
        .sgemm(NO_TRANS, TRANS, 4, 4, 0, &x, 1, &x, 1, &mut c)
        .unwrap_err();
    assert!(e.to_string().contains("empty matrix"), "{e}");
    let e = b
        .sgemm(NO_TRANS, NO_TRANS, 4, 4, 4, &x, 4, &x, 4, &mut c)
        .unwrap_err();
    assert!(e.to_string().contains("too small"), "{e}");
    b.sgemm(NO_TRANS, NO_TRANS, 4, 4, 3, &x, 3, &x, 4, &mut c)
        .unwrap();
    assert!(c.iter().all(|&v| v == 3.0));
    // a leading dimension shorter than its row reads the wrong elements: refused (lda 2 < k 3)
    let e = b
        .gemm(NO_TRANS, NO_TRANS, 2, 4, 3, &x, 2, &x, 4, 0.0, &mut c, 4)
        .unwrap_err();
    assert!(e.to_string().contains("leading dimensions"), "{e}");
    // a size past the BLAS's 32-bit ints would wrap in a cast: refused before any access
    let e = b
        .gemm(
            NO_TRANS,
            NO_TRANS,
            1,
            4,
            3,
            &x,
            1 << 31,
            &x,
            4,
            0.0,
            &mut c,
            4,
        )
        .unwrap_err();
    assert!(e.to_string().contains("exceeds the BLAS's 32-bit"), "{e}");
}

/// `serial` runs its closure with one BLAS thread and restores the count afterwards, also when
/// the closure panics (a guard, not a statement after the call).
#[test]
fn serial_restores_threads_after_a_panic() {
    let Some(b) = blas() else {
        condenser::runtime::skipped(
            "serial() restore",
            "blas",
            "no BLAS library loaded (run datasets/fetch.sh)",
        );
        return;
    };
    use condenser::model::kernels::blas::serial;
    let before = b.threads();
    if before <= 1 {
        condenser::runtime::skipped(
            "serial() restore",
            "threads",
            "the BLAS runs 1 thread here, so a restore cannot be told apart",
        );
        return;
    }
    assert!(serial(|| b.is_serial()));
    assert_eq!(b.threads(), before);
    let r = std::panic::catch_unwind(|| serial(|| panic!("inside serial")));
    assert!(r.is_err());
    assert_eq!(
        b.threads(),
        before,
        "the thread count was not restored after a panic"
    );
}
