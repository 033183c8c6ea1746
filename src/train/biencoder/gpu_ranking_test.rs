//! The device's ranking loss (model/engine/gpu/ranking.rs) (the emulated device: heads.cu's kernels
//! by g++, the CPU's BLAS for the products) against candle's `in_batch_ranking` and its
//! autograd, in f32 and in f64.
use crate::model::engine::gpu::{ranking_loss, Buf, Emulated, Shape};
use crate::train::losses::{in_batch_ranking, Ranking};
use candle_core::{DType, Device, Tensor, Var};

/// Candle's loss and gradient with respect to the embeddings (rows x width), in `dtype`.
fn candle_ranking(
    emb: &[f32],
    shape: Shape,
    r: Ranking,
    ids: Option<&[u32]>,
    weight: f64,
    dtype: DType,
) -> (f64, Vec<f64>) {
    let t = Tensor::from_vec(emb.to_vec(), (shape.rows, shape.width), &Device::Cpu)
        .unwrap()
        .to_dtype(dtype)
        .unwrap();
    let v = Var::from_tensor(&t).unwrap();
    let b = shape.anchors;
    let (a, c) = (
        v.as_tensor().narrow(0, 0, b).unwrap(),
        v.as_tensor().narrow(0, b, shape.rows - b).unwrap(),
    );
    let mask = ids.map(|ids| {
        let ids = Tensor::from_vec(ids.to_vec(), (b, 2), &Device::Cpu).unwrap();
        crate::train::losses::false_negatives(&ids, shape.rows - b).unwrap()
    });
    let loss = in_batch_ranking(&a, &c, r.scale, r.cosine, mask.as_ref()).unwrap();
    let loss = loss.affine(weight, 0.0).unwrap();
    let g = loss.backward().unwrap();
    let grad = g.get(v.as_tensor()).unwrap().to_dtype(DType::F64).unwrap();
    let value = loss
        .to_dtype(DType::F64)
        .unwrap()
        .to_scalar::<f64>()
        .unwrap();
    (value, grad.flatten_all().unwrap().to_vec1().unwrap())
}

/// The largest difference of `got` from `want`, of want's largest value.
fn off(got: &[f64], want: &[f64]) -> f64 {
    let scale = want.iter().fold(0f64, |m, v| m.max(v.abs()));
    got.iter()
        .zip(want)
        .map(|(a, b)| (a - b).abs())
        .fold(0f64, f64::max)
        / scale
}

/// `batch`'s shape: six anchors, then six positives and six negatives, 40 wide.
const SHAPE: Shape = Shape {
    rows: 18,
    anchors: 6,
    width: 40,
};

/// `batch`'s rows' text ids (anchor, positive): rows 0 and 3 share their anchor.
const IDS: [u32; 12] = [0, 1, 2, 3, 4, 5, 0, 6, 7, 8, 9, 10];

/// Anchors, positives and one column of hard negatives (6 rows of 40 each): positives are
/// `near` x their anchor plus noise, negatives opposed to it. Rows 0 and 3 share their anchor
/// (one text, one embedding; the ids below say so).
fn batch(near: f32, noise: f32) -> Vec<f32> {
    let (b, w) = (6, 40);
    let mut base: Vec<f32> = crate::model::kernels::test_data(b * w, 11);
    base.copy_within(0..w, 3 * w);
    let mut emb = base.clone();
    for (k, n) in crate::model::kernels::test_data(2 * b * w, 12)
        .iter()
        .enumerate()
    {
        let a = base[k % (b * w)];
        emb.push(if k < b * w { near * a } else { -0.3 * a } + noise * n);
    }
    emb
}

/// mnr, mnr-masked (rows 0 and 3 share their anchor: each one's positive leaves the other's
/// softmax) and contrastive (the dot product) on the device, weighted 0.5, against f64: a
/// batch whose loss is near 1, and one nearly solved (mnr-masked's loss 9e-6), where candle's
/// f32 gradient is off f64 by 5.4e-4 (p - 1 in f32) and the device's, which sums the other
/// candidates' share apart, by 3.4e-7.
#[test]
fn ranking_on_the_device_matches_f64() {
    let Some(dev) = Emulated::for_test("the device's ranking loss") else {
        return;
    };
    let (shape, ids) = (SHAPE, IDS.to_vec());
    let spec = |name| crate::train::losses::find(name).unwrap().ranking.unwrap();
    let (mnr, masked, dot) = (spec("mnr"), spec("mnr-masked"), spec("contrastive"));
    let mut room = None;
    for (what, emb) in [
        ("near 1", batch(0.5, 0.7)),
        ("nearly solved", batch(1.0, 0.2)),
    ] {
        for (r, ids) in [(mnr, None), (masked, Some(&ids[..])), (dot, None)] {
            let x = Buf::of(&dev, &emb).unwrap();
            let g = Buf::<_, f32>::zeros(&dev, emb.len()).unwrap();
            let value =
                ranking_loss(&dev, &mut room, r, (x.at(0), shape), ids, 0.5, g.at(0)).unwrap();
            let got: Vec<f64> = g
                .read(&dev, 0, emb.len())
                .unwrap()
                .iter()
                .map(|&v| v as f64)
                .collect();
            let (v32, g32) = candle_ranking(&emb, shape, r, ids, 0.5, DType::F32);
            let (v64, g64) = candle_ranking(&emb, shape, r, ids, 0.5, DType::F64);
            eprintln!(
                "{what}, {r:?}: loss {value} (candle f32 {v32}, f64 {v64}); the gradient off \
                 f64 by {:.1e} (candle's f32 by {:.1e})",
                off(&got, &g64),
                off(&g32, &g64)
            );
            // the value is a difference (logsumexp - target's) in f32 on both engines
            assert!(
                (value - v64).abs() <= 1e-6 + 1e-5 * v64.abs(),
                "{what}, {r:?}: loss"
            );
            // measured: 4.1e-7 at most
            assert!(off(&got, &g64) <= 1e-5, "{what}, {r:?}: gradient");
        }
    }
}

/// The device's gradient against central differences of its own loss (f32, step 1e-2 on
/// values near 1): a few coordinates of anchors, positives and negatives, mnr-masked on the
/// batch whose loss is near 1.
#[test]
fn ranking_on_the_device_matches_finite_differences() {
    let Some(dev) = Emulated::for_test("the device's ranking loss") else {
        return;
    };
    let (shape, ids) = (SHAPE, IDS.to_vec());
    let r = crate::train::losses::find("mnr-masked")
        .unwrap()
        .ranking
        .unwrap();
    let emb = batch(0.5, 0.7);
    let mut room = None;
    let g = Buf::<_, f32>::zeros(&dev, emb.len()).unwrap();
    let mut loss = |e: &[f32]| {
        let x = Buf::of(&dev, e).unwrap();
        ranking_loss(
            &dev,
            &mut room,
            r,
            (x.at(0), shape),
            Some(&ids),
            1.0,
            g.at(0),
        )
        .unwrap()
    };
    loss(&emb);
    let grad = g.read(&dev, 0, emb.len()).unwrap();
    let eps = 1e-2f32;
    for k in [
        0,
        17,
        125,
        3 * 40 + 5,
        6 * 40 + 3,
        9 * 40 + 39,
        12 * 40 + 1,
        17 * 40 + 20,
    ] {
        let (mut up, mut down) = (emb.clone(), emb.clone());
        up[k] += eps;
        down[k] -= eps;
        let fd = (loss(&up) - loss(&down)) / (2.0 * eps as f64);
        let scale = grad.iter().fold(0f32, |m, v| m.max(v.abs())) as f64;
        assert!(
            (fd - grad[k] as f64).abs() <= 2e-3 * scale,
            "coordinate {k}: {} against finite differences {fd}",
            grad[k]
        );
    }
}
