//! AdamW (mod.rs) against sentence-transformers' decay groups and torch's update rule.
use super::*;
use candle_core::{DType, Device, Tensor, Var};

#[test]
fn decay_groups_follow_sentence_transformers() {
    assert!(decays("encoder.layer.0.attention.self.query.weight"));
    assert!(!decays("encoder.layer.0.attention.self.query.bias"));
    assert!(!decays("embeddings.LayerNorm.weight"));
    assert!(!decays("classifier.bias"));
}

/// Two torch AdamW steps on w = [1, -2] with gradients [0.5, 0.1] then [0.2, -0.3], computed
/// by hand from torch's update rule.
#[test]
fn adamw_matches_torch_update_rule() {
    for tensor_moments in [false, true] {
        torch_rule(tensor_moments);
    }
}

/// Host moments (the CPU path) and tensor moments (the GPU path) against the same hand rule.
fn torch_rule(tensor_moments: bool) {
    let dev = Device::Cpu;
    let w = Var::from_slice(&[1f32, -2.0], 2, &dev).unwrap();
    let b = Var::from_slice(&[1f32, -2.0], 2, &dev).unwrap();
    let vars = vec![("l.weight".into(), w.clone()), ("l.bias".into(), b.clone())];
    let mut opt = if tensor_moments {
        AdamW::with_tensor_moments(vars, 0.01).unwrap()
    } else {
        AdamW::new(vars, 0.01)
    };
    let (lr, eps) = (0.1, 1e-8);
    let mut want_w = [1f64, -2.0];
    let mut want_b = [1f64, -2.0];
    let (mut m, mut v) = ([0f64; 2], [0f64; 2]);
    for (t, g) in [[0.5f64, 0.1], [0.2, -0.3]].iter().enumerate() {
        let gt = Tensor::from_slice(&[g[0] as f32, g[1] as f32], 2, &dev).unwrap();
        let loss = (w.as_tensor() * &gt)
            .unwrap()
            .sum_all()
            .unwrap()
            .add(&(b.as_tensor() * &gt).unwrap().sum_all().unwrap())
            .unwrap();
        let grads = opt.gradients(loss.backward().unwrap());
        opt.step(&grads, lr, 1.0).unwrap();
        let t = (t + 1) as i32;
        for i in 0..2 {
            m[i] = 0.9 * m[i] + 0.1 * g[i];
            v[i] = 0.999 * v[i] + 0.001 * g[i] * g[i];
            let upd = lr * (m[i] / (1.0 - 0.9f64.powi(t)))
                / ((v[i] / (1.0 - 0.999f64.powi(t))).sqrt() + eps);
            want_w[i] = want_w[i] * (1.0 - lr * 0.01) - upd;
            want_b[i] -= upd;
        }
    }
    let (gw, gb) = (
        w.as_tensor().to_vec1::<f32>().unwrap(),
        b.as_tensor().to_vec1::<f32>().unwrap(),
    );
    for i in 0..2 {
        assert!(
            (gw[i] as f64 - want_w[i]).abs() < 1e-6,
            "weight {i} ({tensor_moments}): {} vs {}",
            gw[i],
            want_w[i]
        );
        assert!(
            (gb[i] as f64 - want_b[i]).abs() < 1e-6,
            "bias {i} ({tensor_moments})"
        );
    }
    // the state round-trips through a checkpoint's tensors
    let state = opt.state().unwrap();
    assert_eq!(state["l.weight.m"].dims(), &[2]);
    opt.load_state(&state, 2).unwrap();
    // a state that does not fit, and gradients that do not, are errors (zip used to truncate)
    let mut short = state.clone();
    short.insert(
        "l.bias.v".into(),
        Tensor::zeros(1, DType::F32, &Device::Cpu).unwrap(),
    );
    let e = opt.load_state(&short, 2).unwrap_err().to_string();
    assert!(e.contains("l.bias.v has 1 values"), "{e}");
    let lone = [Some(Tensor::zeros(1, DType::F32, &Device::Cpu).unwrap())];
    assert!(
        opt.step(&lone, 1e-3, 1.0).is_err(),
        "one gradient for two parameters"
    );
    assert_eq!(
        opt.state().unwrap()["l.bias.v"].to_vec1::<f32>().unwrap(),
        state["l.bias.v"].to_vec1::<f32>().unwrap()
    );
}

/// The tensor-op route (moments as tensors: a parameter neither on the host nor the CUDA
/// kernel's) and the host kernel round alike: three steps with weight decay, clipping-like
/// scales and gradients of every magnitude give the same bits (issue 83: AdamW once).
#[test]
fn tensor_moments_round_as_the_host_kernel() {
    let dev = Device::Cpu;
    let n = 5_000;
    let w0 = crate::model::kernels::test_data(n, 3);
    let make = || {
        let w = Var::from_slice(&w0, n, &dev).unwrap();
        let b = Var::from_slice(&w0[..64], 64, &dev).unwrap();
        vec![("l.weight".to_string(), w), ("l.bias".to_string(), b)]
    };
    let mut on_tensors = AdamW::with_tensor_moments(make(), 0.01).unwrap();
    let mut on_host = AdamW::new(make(), 0.01);
    for step in 0..3u32 {
        let g: Vec<f32> = crate::model::kernels::test_data(n, 11 + step)
            .iter()
            .enumerate()
            .map(|(i, x)| x * 10f32.powi(i as i32 % 7 - 4))
            .collect();
        let grads = vec![
            Some(Tensor::from_slice(&g, n, &dev).unwrap()),
            Some(Tensor::from_slice(&g[..64], 64, &dev).unwrap()),
        ];
        let scale = 0.5 / (step + 1) as f64;
        on_tensors.step(&grads, 1e-2, scale).unwrap();
        on_host.step(&grads, 1e-2, scale).unwrap();
    }
    for (a, b) in on_tensors.vars().iter().zip(on_host.vars()) {
        let bits = |v: &Var| -> Vec<u32> {
            let x = v.as_tensor().to_vec1::<f32>().unwrap();
            x.iter().map(|f| f.to_bits()).collect()
        };
        assert_eq!(
            bits(a),
            bits(&b),
            "the tensor route's weights differ from the host's"
        );
    }
}
