//! heads.rs's tests: the device's pooling (every mode heads.cu takes, alone and together) and
//! row normalisation, forward and backward on the emulated device, against candle's
//! `Pooling::forward` and `l2_normalize` and their autograd over the same rows padded.
use super::super::buffers::Rows;
use super::super::device::Buf;
use super::super::emulated::Emulated;
use super::{normalize, normalize_backward, pool, pool_backward, DevicePooling};
use crate::model::engine::gpu::assert_close as close;
use crate::model::kernels::test_data;
use crate::model::{l2_normalize, Pooling};
use candle_core::{Device, Tensor, Var};

/// Three items of 3, 1 and 5 rows, 40 wide.
const LENS: [usize; 3] = [3, 1, 5];
const H: usize = 40;

/// The packed rows as candle's heads take them: (items, 5, H), zeros past each length, and the mask.
fn padded(x: &[f32]) -> (Tensor, Tensor) {
    let l = *LENS.iter().max().unwrap();
    let (mut states, mut mask) = (vec![0f32; LENS.len() * l * H], vec![0u32; LENS.len() * l]);
    let mut r = 0;
    for (i, &n) in LENS.iter().enumerate() {
        for pos in 0..n {
            states[(i * l + pos) * H..(i * l + pos + 1) * H]
                .copy_from_slice(&x[r * H..(r + 1) * H]);
            mask[i * l + pos] = 1;
            r += 1;
        }
    }
    (
        Tensor::from_vec(states, (LENS.len(), l, H), &Device::Cpu).unwrap(),
        Tensor::from_vec(mask, (LENS.len(), l), &Device::Cpu).unwrap(),
    )
}

/// A padded gradient (items, 5, H) back in packed rows.
fn packed(g: &Tensor) -> Vec<f32> {
    let g: Vec<Vec<Vec<f32>>> = g.to_vec3().unwrap();
    LENS.iter()
        .enumerate()
        .flat_map(|(i, &n)| g[i][..n].concat())
        .collect()
}

#[test]
fn pooling_and_normalising_match_candle() {
    let Some(dev) = Emulated::for_test("the device's pooling") else {
        return;
    };
    let t: usize = LENS.iter().sum();
    let x = test_data(t * H, 21);
    let (off, len): (Vec<i32>, Vec<i32>) = (
        LENS.iter()
            .scan(0, |o, &n| Some(std::mem::replace(o, *o + n) as i32))
            .collect(),
        LENS.iter().map(|&n| n as i32).collect(),
    );
    let meta = Buf::of(&dev, &[off, len].concat()).unwrap();
    let rows = Rows {
        t,
        items: LENS.len(),
        off: meta.at(0),
        len: meta.at(LENS.len()),
        row_ids: 0,
    };
    let xs = Buf::of(&dev, &x).unwrap();
    let flag = |cls, mean, mean_sqrt_len| Pooling {
        cls,
        max: false,
        mean,
        mean_sqrt_len,
    };
    let poolings = [
        flag(true, false, false),
        flag(false, true, false),
        flag(false, false, true),
        flag(true, true, true),
    ];
    assert!(
        DevicePooling::of(Pooling::MAX).is_none(),
        "max needs its winners"
    );
    for p in poolings {
        let dp = DevicePooling::of(p).unwrap();
        let w = H * p.modes();
        let n = LENS.len();
        let (pooled, normed, norms) = (
            Buf::<_, f32>::zeros(&dev, n * w).unwrap(),
            Buf::<_, f32>::zeros(&dev, n * w).unwrap(),
            Buf::<_, f32>::zeros(&dev, n).unwrap(),
        );
        pool(&dev, dp, (xs.at(0), &rows), H, pooled.at(0)).unwrap();
        normalize(&dev, pooled.at(0), (n, w), normed.at(0), norms.at(0)).unwrap();
        // candle: the same rows padded, pooled, normalised, and the gradient of sum(y * up)
        let (states, mask) = padded(&x);
        let v = Var::from_tensor(&states).unwrap();
        let want_pooled = p.forward(v.as_tensor(), &mask).unwrap();
        let want_y = l2_normalize(&want_pooled).unwrap();
        let up = test_data(n * w, 22);
        let up_t = Tensor::from_vec(up.clone(), (n, w), &Device::Cpu).unwrap();
        let grads = (&want_y * &up_t)
            .unwrap()
            .sum_all()
            .unwrap()
            .backward()
            .unwrap();
        let what = p.mode_name();
        let flat = |t: &Tensor| t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        close(
            &what,
            &pooled.read(&dev, 0, n * w).unwrap(),
            &flat(&want_pooled),
            1e-6,
        );
        close(
            &what,
            &normed.read(&dev, 0, n * w).unwrap(),
            &flat(&want_y),
            1e-6,
        );
        // backward: the normalisation in place, then the pooling into every packed row
        let g = Buf::of(&dev, &up).unwrap();
        normalize_backward(&dev, (normed.at(0), norms.at(0)), g.at(0), (n, w), g.at(0)).unwrap();
        let dx = Buf::of(&dev, &vec![f32::NAN; t * H]).unwrap();
        pool_backward(&dev, dp, (g.at(0), &rows), H, dx.at(0)).unwrap();
        let want_dx = packed(grads.get(v.as_tensor()).unwrap());
        close(&what, &dx.read(&dev, 0, t * H).unwrap(), &want_dx, 1e-5);
    }
}

/// `sum(normalize(pool(x)) * up)`'s gradient by the device against central differences of the
/// same sum on the device (every mode at once), at a few rows' coordinates.
#[test]
fn pooling_gradients_match_finite_differences() {
    let Some(dev) = Emulated::for_test("the device's pooling") else {
        return;
    };
    let t: usize = LENS.iter().sum();
    let (off, len) = ([0i32, 3, 4], [3i32, 1, 5]);
    let meta = Buf::of(&dev, &[off, len].concat()).unwrap();
    let rows = Rows {
        t,
        items: 3,
        off: meta.at(0),
        len: meta.at(3),
        row_ids: 0,
    };
    let p = Pooling {
        cls: true,
        max: false,
        mean: true,
        mean_sqrt_len: true,
    };
    let dp = DevicePooling::of(p).unwrap();
    let (n, w) = (3, 3 * H);
    let up = test_data(n * w, 22);
    let (pooled, y, norms) = (
        Buf::<_, f32>::zeros(&dev, n * w).unwrap(),
        Buf::<_, f32>::zeros(&dev, n * w).unwrap(),
        Buf::<_, f32>::zeros(&dev, n).unwrap(),
    );
    let value = |x: &[f32]| -> f64 {
        let xs = Buf::of(&dev, x).unwrap();
        pool(&dev, dp, (xs.at(0), &rows), H, pooled.at(0)).unwrap();
        normalize(&dev, pooled.at(0), (n, w), y.at(0), norms.at(0)).unwrap();
        let y = y.read(&dev, 0, n * w).unwrap();
        y.iter().zip(&up).map(|(a, b)| (a * b) as f64).sum()
    };
    let x = test_data(t * H, 21);
    value(&x);
    let g = Buf::of(&dev, &up).unwrap();
    normalize_backward(&dev, (y.at(0), norms.at(0)), g.at(0), (n, w), g.at(0)).unwrap();
    let dx = Buf::<_, f32>::zeros(&dev, t * H).unwrap();
    pool_backward(&dev, dp, (g.at(0), &rows), H, dx.at(0)).unwrap();
    let dx = dx.read(&dev, 0, t * H).unwrap();
    let scale = dx.iter().fold(0f32, |m, v| m.max(v.abs())) as f64;
    let eps = 1e-2f32;
    // a first row, a lone item's row, a middle row, a last row
    for k in [3, H + 7, 3 * H + 11, 5 * H + 20, 8 * H + 39] {
        let (mut a, mut b) = (x.clone(), x.clone());
        a[k] += eps;
        b[k] -= eps;
        let fd = (value(&a) - value(&b)) / (2.0 * eps as f64);
        assert!(
            (fd - dx[k] as f64).abs() <= 2e-3 * scale,
            "coordinate {k}: {} against finite differences {fd}",
            dx[k]
        );
    }
}
