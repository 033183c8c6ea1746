//! Finite-difference gradient checks of every op a training forward pass uses.
use candle_core::{DType, Device, Module, Tensor};
use candle_nn::VarBuilder;
use condenser::model::kernels::{gelu::gelu_erf, softmax::softmax_last_dim};
use condenser::model::{
    attention_bias, l2_normalize, masked_softmax, matmul, Bert, BertConfig, BertLayer, LayerNorm,
    Linear, Pooling,
};
use condenser::train::GradCheck;
use std::collections::HashMap;

const TOL: f64 = 2e-2;

/// Seeded normal draws (candle's CPU randn cannot be seeded): the checks are reproducible.
fn randn(shape: &[usize]) -> Tensor {
    use rand::{Rng, SeedableRng};
    thread_local!(static RNG: std::cell::RefCell<rand::rngs::StdRng> = std::cell::RefCell::new(rand::rngs::StdRng::seed_from_u64(3)));
    let n: usize = shape.iter().product();
    // Box-Muller from uniform draws
    let v: Vec<f32> = RNG.with(|r| {
        let mut r = r.borrow_mut();
        (0..n)
            .map(|_| {
                let (u1, u2): (f64, f64) = (r.random::<f64>().max(1e-12), r.random());
                ((-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()) as f32
            })
            .collect()
    });
    Tensor::from_vec(v, shape, &Device::Cpu).unwrap()
}

fn check(name: &str, inputs: &[Tensor], f: impl Fn(&[Tensor]) -> candle_core::Result<Tensor>) {
    let worst = GradCheck::default().run(inputs, f).unwrap();
    assert!(worst < TOL, "{name}: worst relative error {worst}");
    eprintln!("{name}: worst relative error {worst:.2e}");
}

fn tiny_config() -> BertConfig {
    serde_json::from_value(serde_json::json!({
        "vocab_size": 20, "hidden_size": 8, "num_hidden_layers": 2, "num_attention_heads": 2,
        "intermediate_size": 16, "max_position_embeddings": 16, "layer_norm_eps": 1e-12
    }))
    .unwrap()
}

/// Random weights for a tiny BERT, by HF name, as inputs the check can perturb.
fn tiny_weights(c: &BertConfig) -> Vec<(String, Tensor)> {
    let (h, i) = (c.hidden_size, c.intermediate_size);
    let mut w = vec![
        (
            "embeddings.word_embeddings.weight".to_string(),
            randn(&[c.vocab_size, h]),
        ),
        (
            "embeddings.position_embeddings.weight".into(),
            randn(&[c.max_position_embeddings, h]),
        ),
        (
            "embeddings.token_type_embeddings.weight".into(),
            randn(&[2, h]),
        ),
        (
            "embeddings.LayerNorm.weight".into(),
            randn(&[h]).affine(0.1, 1.0).unwrap(),
        ),
        (
            "embeddings.LayerNorm.bias".into(),
            (randn(&[h]) * 0.1).unwrap(),
        ),
    ];
    for l in 0..c.num_hidden_layers {
        let p = format!("encoder.layer.{l}");
        for (n, shape) in [
            ("attention.self.query", vec![h, h]),
            ("attention.self.key", vec![h, h]),
            ("attention.self.value", vec![h, h]),
            ("attention.output.dense", vec![h, h]),
            ("intermediate.dense", vec![i, h]),
            ("output.dense", vec![h, i]),
        ] {
            w.push((format!("{p}.{n}.weight"), (randn(&shape) * 0.3).unwrap()));
            w.push((format!("{p}.{n}.bias"), (randn(&[shape[0]]) * 0.1).unwrap()));
        }
        for n in ["attention.output.LayerNorm", "output.LayerNorm"] {
            w.push((
                format!("{p}.{n}.weight"),
                randn(&[h]).affine(0.1, 1.0).unwrap(),
            ));
            w.push((format!("{p}.{n}.bias"), (randn(&[h]) * 0.1).unwrap()));
        }
    }
    w
}

fn vb_from(names: &[String], ts: &[Tensor]) -> VarBuilder<'static> {
    let map: HashMap<String, Tensor> = names.iter().cloned().zip(ts.iter().cloned()).collect();
    VarBuilder::from_tensors(map, DType::F32, &Device::Cpu)
}

#[test]
fn elementwise_and_normalisation_ops() {
    check(
        "layer_norm (fused)",
        &[randn(&[3, 5, 8]), randn(&[8]), randn(&[8])],
        |x| LayerNorm::new(x[1].clone(), x[2].clone(), 1e-12).forward(&x[0]),
    );
    check(
        "layer_norm (composed)",
        &[randn(&[3, 5, 8]), randn(&[8]), randn(&[8])],
        |x| LayerNorm::new(x[1].clone(), x[2].clone(), 1e-12).composed(&x[0]),
    );
    check("softmax (composed)", &[randn(&[3, 7])], |x| {
        softmax_last_dim(&x[0])
    });
    let mask = Tensor::new(&[[1u32, 1, 1, 0, 0], [1, 1, 1, 1, 1]], &Device::Cpu).unwrap();
    let bias = attention_bias(&mask, DType::F32).unwrap();
    check("masked_softmax (fused)", &[randn(&[2, 2, 3, 5])], |x| {
        masked_softmax(&x[0], &bias, 0.5)
    });
    check("gelu (fused)", &[(randn(&[40]) * 2.0).unwrap()], |x| {
        gelu_erf(&x[0])
    });
    check("l2_normalize", &[randn(&[4, 6])], |x| l2_normalize(&x[0]));
}

/// The composed attention core the fused op replaces: heads split out, softmax with the mask,
/// dropout as a given mask, context merged back.
fn attention_composed(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    bias: &Tensor,
    heads: usize,
    mask: Option<&Tensor>,
) -> candle_core::Result<Tensor> {
    let (b, s, h) = q.dims3()?;
    let split = |x: &Tensor| -> candle_core::Result<Tensor> {
        x.reshape((b, s, heads, h / heads))?
            .transpose(1, 2)?
            .contiguous()
    };
    let scores = split(q)?.matmul(&split(k)?.t()?)?;
    let mut p =
        softmax_last_dim(&(scores * (1.0 / ((h / heads) as f64).sqrt()))?.broadcast_add(bias)?)?;
    if let Some(m) = mask {
        p = (p * m)?;
    }
    p.matmul(&split(v)?)?.transpose(1, 2)?.reshape((b, s, h))
}

/// The fused attention core (model/kernels/padded_attention.rs) equals the composed one, context and the
/// gradients of q, k and v, with padding and a dropout mask, on enough items for its parallel
/// path; and passes the finite-difference check.
#[test]
fn fused_attention_matches_composed() {
    use condenser::model::kernels::padded_attention::attention;
    let (b, s, h, heads) = (3, 7, 8, 2);
    let mask = Tensor::new(
        &[
            [1u32, 1, 1, 1, 1, 0, 0],
            [1, 1, 1, 1, 1, 1, 1],
            [1, 1, 0, 0, 0, 0, 0],
        ],
        &Device::Cpu,
    )
    .unwrap();
    let bias = attention_bias(&mask, DType::F32).unwrap();
    let drop: Vec<f32> = (0..b * heads * s * s)
        .map(|i| if i % 7 == 3 { 0.0 } else { 1.0 / 0.9 })
        .collect();
    let drop_t = Tensor::from_vec(drop.clone(), (b, heads, s, s), &Device::Cpu).unwrap();
    let vars: Vec<candle_core::Var> = (0..3)
        .map(|_| candle_core::Var::from_tensor(&randn(&[b, s, h])).unwrap())
        .collect();
    let [q, k, v] = [0, 1, 2].map(|i| vars[i].as_tensor().clone());
    let scale = 1.0 / ((h / heads) as f64).sqrt();
    let fused = attention(&q, &k, &v, &bias, heads, scale, Some(drop.clone())).unwrap();
    let composed = attention_composed(&q, &k, &v, &bias, heads, Some(&drop_t)).unwrap();
    let diff = |a: &Tensor, c: &Tensor| condenser::model::max_abs_diff(a, c).unwrap();
    assert!(diff(&fused, &composed) < 1e-5);
    let proj = randn(&[b, s, h]);
    let g1 = (fused * &proj)
        .unwrap()
        .sum_all()
        .unwrap()
        .backward()
        .unwrap();
    let g2 = (composed * &proj)
        .unwrap()
        .sum_all()
        .unwrap()
        .backward()
        .unwrap();
    for (name, var) in ["q", "k", "v"].iter().zip(&vars) {
        let d = diff(g1.get(var).unwrap(), g2.get(var).unwrap());
        assert!(d < 1e-5, "d{name}: {d}");
    }
    check(
        "attention (fused)",
        &[randn(&[b, s, h]), randn(&[b, s, h]), randn(&[b, s, h])],
        |x| attention(&x[0], &x[1], &x[2], &bias, heads, scale, Some(drop.clone())),
    );
}

/// The fused cross-entropy equals the composed one, value and gradient, on logits as wide as a
/// vocabulary; a class id out of range is an error, not a wrong loss.
#[test]
fn fused_cross_entropy_matches_composed() {
    use condenser::train::losses::{cross_entropy, cross_entropy_composed};
    let x = candle_core::Var::from_tensor(&randn(&[37, 3000]).affine(4.0, 0.0).unwrap()).unwrap();
    let ids: Vec<u32> = (0..37u32).map(|i| (i * 811) % 3000).collect();
    let classes = Tensor::new(ids.as_slice(), &Device::Cpu).unwrap();
    let fused = cross_entropy(x.as_tensor(), &classes).unwrap();
    let composed = cross_entropy_composed(x.as_tensor(), &classes).unwrap();
    let (a, b) = (
        fused.to_scalar::<f32>().unwrap(),
        composed.to_scalar::<f32>().unwrap(),
    );
    assert!((a - b).abs() < 1e-5 * b.abs(), "{a} vs {b}");
    let g1 = (fused * 3.0).unwrap().backward().unwrap();
    let g2 = (composed * 3.0).unwrap().backward().unwrap();
    let d = condenser::model::max_abs_diff(g1.get(&x).unwrap(), g2.get(&x).unwrap()).unwrap();
    assert!(d < 1e-6, "gradients differ by {d}");
    check("cross_entropy (fused)", &[randn(&[5, 9])], |t| {
        cross_entropy(
            &t[0],
            &Tensor::new(&[0u32, 8, 3, 3, 1], &Device::Cpu).unwrap(),
        )
    });
    let bad = Tensor::new(&[0u32, 9, 3, 3, 1], &Device::Cpu).unwrap();
    assert!(cross_entropy(&randn(&[5, 9]), &bad).is_err());
}

/// The fused LayerNorm equals the composed one, value and every gradient, on shapes that take
/// both its serial and its parallel path (BERT's 384 wide, 40 and 600 rows).
#[test]
fn fused_layer_norm_matches_composed() {
    for rows in [40, 600] {
        let x =
            candle_core::Var::from_tensor(&randn(&[rows, 384]).affine(3.0, 1.0).unwrap()).unwrap();
        let w = candle_core::Var::from_tensor(&randn(&[384])).unwrap();
        let b = candle_core::Var::from_tensor(&randn(&[384])).unwrap();
        let ln = LayerNorm::new(w.as_tensor().clone(), b.as_tensor().clone(), 1e-12);
        let proj = randn(&[rows, 384]);
        let fused = ln.forward(x.as_tensor()).unwrap();
        let composed = ln.composed(x.as_tensor()).unwrap();
        let d = condenser::model::max_abs_diff(&fused, &composed).unwrap();
        assert!(d < 1e-5, "{rows} rows: values differ by {d}");
        let g1 = (fused * &proj)
            .unwrap()
            .sum_all()
            .unwrap()
            .backward()
            .unwrap();
        let g2 = (composed * &proj)
            .unwrap()
            .sum_all()
            .unwrap()
            .backward()
            .unwrap();
        for (name, v) in [("x", &x), ("weight", &w), ("bias", &b)] {
            let (a, c) = (g1.get(v).unwrap(), g2.get(v).unwrap());
            let scale = c
                .abs()
                .unwrap()
                .max_all()
                .unwrap()
                .to_scalar::<f32>()
                .unwrap();
            let d = condenser::model::max_abs_diff(a, c).unwrap();
            assert!(
                d < 1e-4 * scale,
                "{rows} rows, d{name}: {d} (scale {scale})"
            );
        }
    }
}

#[test]
fn matmul_linear_and_embedding() {
    check(
        "matmul (blas)",
        &[randn(&[2, 3, 4, 5]), randn(&[2, 3, 5, 6])],
        |x| matmul(&x[0], &x[1]),
    );
    check(
        "matmul transposed rhs",
        &[randn(&[2, 4, 5]), randn(&[2, 6, 5])],
        |x| matmul(&x[0], &x[1].t()?),
    );
    check(
        "linear",
        &[randn(&[2, 3, 5]), randn(&[4, 5]), randn(&[4])],
        |x| Linear::new(x[1].clone(), Some(x[2].clone())).forward(&x[0]),
    );
    let ids = Tensor::new(&[[1u32, 3, 3], [0, 2, 4]], &Device::Cpu).unwrap();
    check("embedding", &[randn(&[5, 4])], |x| {
        candle_nn::Embedding::new(x[0].clone(), 4).forward(&ids)
    });
}

#[test]
fn pooling_modes() {
    let mask = Tensor::new(&[[1u32, 1, 0, 0], [1, 1, 1, 1]], &Device::Cpu).unwrap();
    for (name, p) in [
        ("mean", Pooling::MEAN),
        ("cls", Pooling::CLS),
        ("max", Pooling::MAX),
        (
            "mean-sqrt-len",
            Pooling::from(condenser::model::PoolingMode::MeanSqrtLen),
        ),
    ] {
        check(&format!("pooling {name}"), &[randn(&[2, 4, 6])], |x| {
            p.forward(&x[0], &mask)
        });
    }
}

#[test]
fn attention_layer_and_whole_bert() {
    let c = tiny_config();
    let weights = tiny_weights(&c);
    let layer_names: Vec<String> = weights
        .iter()
        .filter(|(n, _)| n.starts_with("encoder.layer.0."))
        .map(|(n, _)| n["encoder.layer.0.".len()..].to_string())
        .collect();
    let layer_ts: Vec<Tensor> = weights
        .iter()
        .filter(|(n, _)| n.starts_with("encoder.layer.0."))
        .map(|(_, t)| t.clone())
        .collect();
    let mask = Tensor::new(&[[1u32, 1, 1, 0], [1, 1, 1, 1]], &Device::Cpu).unwrap();
    let bias = attention_bias(&mask, DType::F32).unwrap();
    // w.r.t. the input states and every weight of the layer
    let mut inputs = vec![randn(&[2, 4, 8])];
    inputs.extend(layer_ts);
    check("bert layer (attention + ffn)", &inputs, |x| {
        let layer = BertLayer::load(vb_from(&layer_names, &x[1..]), &c)?;
        layer.forward(&x[0], &bias)
    });
    let names: Vec<String> = weights.iter().map(|(n, _)| n.clone()).collect();
    let ts: Vec<Tensor> = weights.iter().map(|(_, t)| t.clone()).collect();
    let ids = Tensor::new(&[[1u32, 5, 7, 0], [2, 3, 4, 6]], &Device::Cpu).unwrap();
    let types = ids.zeros_like().unwrap();
    check("whole bert + mean pooling", &ts, |x| {
        let bert = Bert::load(vb_from(&names, x), &c)?;
        Pooling::MEAN.forward(&bert.forward(&ids, &types, &mask)?, &mask)
    });
}

#[test]
fn losses() {
    use condenser::train::losses::{bce_with_logits, cross_entropy};
    let targets = Tensor::new(&[0.0f32, 0.3, 1.0, 0.8, 0.5], &Device::Cpu).unwrap();
    check("bce_with_logits", &[(randn(&[5]) * 3.0).unwrap()], |x| {
        bce_with_logits(&x[0], &targets)
    });
    let classes = Tensor::new(&[0u32, 2, 1, 2], &Device::Cpu).unwrap();
    check("cross_entropy", &[randn(&[4, 3])], |x| {
        cross_entropy(&x[0], &classes)
    });
}

#[test]
fn losses_have_the_right_values() {
    use condenser::train::losses::{bce_with_logits, cross_entropy};
    let v = |t: Tensor| t.to_scalar::<f32>().unwrap() as f64;
    // BCE(x = 0, y) = ln 2 for any y; BCE(x = 2, y = 1) = ln(1 + e^-2)
    let l = v(bce_with_logits(
        &Tensor::new(&[0f32, 2.0], &Device::Cpu).unwrap(),
        &Tensor::new(&[0.3f32, 1.0], &Device::Cpu).unwrap(),
    )
    .unwrap());
    assert!((l - (2f64.ln() + (1.0 + (-2f64).exp()).ln()) / 2.0).abs() < 1e-6);
    // CE of logits [0, ln 3] for class 1: -ln(3/4)
    let l = v(cross_entropy(
        &Tensor::new(&[[0f32, 3f32.ln()]], &Device::Cpu).unwrap(),
        &Tensor::new(&[1u32], &Device::Cpu).unwrap(),
    )
    .unwrap());
    assert!((l + (0.75f64).ln()).abs() < 1e-6);
}

#[test]
fn bi_encoder_losses() {
    use condenser::train::losses::{
        cosine_mse, cross_entropy, in_batch_ranking, mse, softmax_features, triplet,
    };
    let labels = Tensor::new(&[0.1f32, 0.9, 0.5, 0.7], &Device::Cpu).unwrap();
    check("cosine_mse", &[randn(&[4, 6]), randn(&[4, 6])], |x| {
        cosine_mse(&x[0], &x[1], &labels)
    });
    check("mse", &[randn(&[4, 6]), randn(&[4, 6])], |x| {
        mse(&x[0], &x[1])
    });
    let classes = Tensor::new(&[0u32, 2, 1, 2], &Device::Cpu).unwrap();
    check(
        "softmax_loss",
        &[randn(&[4, 6]), randn(&[4, 6]), randn(&[3, 18])],
        |x| {
            let logits = softmax_features(&x[0], &x[1])?.matmul(&x[2].t()?)?;
            cross_entropy(&logits, &classes)
        },
    );
    check("mnr", &[randn(&[4, 6]), randn(&[6, 6])], |x| {
        in_batch_ranking(&x[0], &x[1], 20.0, true, None)
    });
    check("dpr", &[randn(&[4, 6]), randn(&[8, 6])], |x| {
        in_batch_ranking(&x[0], &x[1], 1.0, false, None)
    });
    // rows 0 and 2 share their anchor: each other's positive is masked
    let ids = Tensor::new(&[[0u32, 1], [2, 3], [0, 4], [5, 6]], &Device::Cpu).unwrap();
    let mask = condenser::train::losses::false_negatives(&ids, 6).unwrap();
    check("mnr_masked", &[randn(&[4, 6]), randn(&[6, 6])], |x| {
        in_batch_ranking(&x[0], &x[1], 20.0, true, Some(&mask))
    });
    check(
        "triplet",
        &[randn(&[4, 6]), randn(&[4, 6]), randn(&[4, 6])],
        |x| triplet(&x[0], &x[1], &x[2], 5.0),
    );
    check(
        "margin_mse",
        &[randn(&[4, 6]), randn(&[4, 6]), randn(&[4, 6])],
        |x| condenser::train::losses::margin_mse(&x[0], &x[1], &x[2], &(&labels * 3.0)?),
    );
    check("span_contrastive", &[randn(&[6, 5])], |x| {
        condenser::train::losses::span_contrastive(&x[0])
    });
}

#[test]
fn span_contrastive_pairs_neighbours_and_skips_itself() {
    let d = Device::Cpu;
    // rows [a1, b1, a2, b2]; a row's own (large) score must not count
    let x = Tensor::new(&[[2f32, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 3.0]], &d).unwrap();
    let got = condenser::train::losses::span_contrastive(&x)
        .unwrap()
        .to_scalar::<f32>()
        .unwrap() as f64;
    let rows = [
        [2.0, 0.0, 0.0], // a1: b1 = 2, a2 = 0, b2 = 0
        [2.0, 0.0, 0.0], // b1: a1 = 2, a2 = 0, b2 = 0
        [3.0, 0.0, 0.0], // a2: b2 = 3, a1 = 0, b1 = 0
        [3.0, 0.0, 0.0], // b2: a2 = 3, a1 = 0, b1 = 0
    ];
    let want = rows
        .iter()
        .map(|r: &[f64; 3]| {
            let z: f64 = r.iter().map(|v| v.exp()).sum();
            z.ln() - r[0]
        })
        .sum::<f64>()
        / 4.0;
    assert!((got - want).abs() < 1e-5, "{got} vs {want}");
}

#[test]
fn bi_encoder_losses_have_the_right_values() {
    use condenser::train::losses::{cosine_mse, in_batch_ranking, mse, softmax_features, triplet};
    let d = Device::Cpu;
    let v = |t: Tensor| t.to_scalar::<f32>().unwrap() as f64;
    let close = |a: f64, b: f64, what: &str| assert!((a - b).abs() < 1e-5, "{what}: {a} vs {b}");
    let m = v(mse(
        &Tensor::new(&[[1f32, 2.0]], &d).unwrap(),
        &Tensor::new(&[[0f32, 0.0]], &d).unwrap(),
    )
    .unwrap());
    close(m, 2.5, "mse");
    // cos([1, 0], [1, 1]) = 1/sqrt 2 against 0.5; cos([0, 2], [0, 3]) = 1 against 1
    let c = v(cosine_mse(
        &Tensor::new(&[[1f32, 0.0], [0.0, 2.0]], &d).unwrap(),
        &Tensor::new(&[[1f32, 1.0], [0.0, 3.0]], &d).unwrap(),
        &Tensor::new(&[0.5f32, 1.0], &d).unwrap(),
    )
    .unwrap());
    close(c, (0.5f64.sqrt() - 0.5).powi(2) / 2.0, "cosine_mse");
    let f = softmax_features(
        &Tensor::new(&[[1f32, 2.0]], &d).unwrap(),
        &Tensor::new(&[[3f32, 1.0]], &d).unwrap(),
    )
    .unwrap();
    assert_eq!(
        f.to_vec2::<f32>().unwrap(),
        vec![vec![1.0, 2.0, 3.0, 1.0, 2.0, 1.0]]
    );
    let eye = Tensor::new(&[[1f32, 0.0], [0.0, 1.0]], &d).unwrap();
    // dot scores [[1, 0], [0, 1]]: each row's CE is ln(1 + e^-1)
    close(
        v(in_batch_ranking(&eye, &eye, 1.0, false, None).unwrap()),
        (1.0 + (-1f64).exp()).ln(),
        "dpr",
    );
    // cosine x 20 with a hard negative [1, 1]/sqrt2 for both: row CE = ln(1 + e^-20 + e^(20/sqrt2 - 20))
    let cands = Tensor::new(&[[1f32, 0.0], [0.0, 1.0], [1.0, 1.0]], &d).unwrap();
    let want = (1.0 + (-20f64).exp() + (20.0 * 0.5f64.sqrt() - 20.0).exp()).ln();
    close(
        v(in_batch_ranking(&eye, &cands, 20.0, true, None).unwrap()),
        want,
        "mnr",
    );
    // the same rows sharing their anchor (ids 0, 0): each row's other positive leaves its
    // softmax, the hard negative stays: row CE = ln(1 + e^(20/sqrt2 - 20))
    let ids = Tensor::new(&[[0u32, 1], [0, 2]], &d).unwrap();
    let mask = condenser::train::losses::false_negatives(&ids, 3).unwrap();
    assert_eq!(
        mask.to_vec2::<f32>().unwrap(),
        vec![vec![0.0, -1e9, 0.0], vec![-1e9, 0.0, 0.0]]
    );
    close(
        v(in_batch_ranking(&eye, &cands, 20.0, true, Some(&mask)).unwrap()),
        (1.0 + (20.0 * 0.5f64.sqrt() - 20.0).exp()).ln(),
        "mnr masked",
    );
    // |a - p| = 5, |a - n| = 1: 5 - 1 + 5 = 9; second row 1 - 10 + 5 < 0: 0
    let t = v(triplet(
        &Tensor::new(&[[0f32, 0.0], [0.0, 0.0]], &d).unwrap(),
        &Tensor::new(&[[3f32, 4.0], [0.0, 1.0]], &d).unwrap(),
        &Tensor::new(&[[0f32, 1.0], [6.0, 8.0]], &d).unwrap(),
        5.0,
    )
    .unwrap());
    close(t, 4.5, "triplet");
    // q.p - q.n = 2 - 1 = 1 against 3 (sq 4); 0 - 2 = -2 against -2 (0): mean 2
    let mm = v(condenser::train::losses::margin_mse(
        &Tensor::new(&[[1f32, 1.0], [0.0, 1.0]], &d).unwrap(),
        &Tensor::new(&[[2f32, 0.0], [1.0, 0.0]], &d).unwrap(),
        &Tensor::new(&[[0f32, 1.0], [0.0, 2.0]], &d).unwrap(),
        &Tensor::new(&[3f32, -2.0], &d).unwrap(),
    )
    .unwrap());
    close(mm, 2.0, "margin_mse");
}

#[test]
fn condenser_head_ops() {
    // the head input (cat of the last CLS and early tokens), the gather of masked positions and
    // the MLM head with its decoder tied to the word embeddings, w.r.t. states, embeddings and head
    let c = tiny_config();
    let pos = Tensor::new(&[1u32, 4, 6], &Device::Cpu).unwrap();
    let names: Vec<String> = [
        "transform.dense.weight",
        "transform.dense.bias",
        "transform.LayerNorm.weight",
        "transform.LayerNorm.bias",
        "bias",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let (h, v) = (c.hidden_size, c.vocab_size);
    let inputs = vec![
        randn(&[2, 4, h]),
        randn(&[2, 4, h]),
        randn(&[v, h]),
        (randn(&[h, h]) * 0.3).unwrap(),
        randn(&[h]),
        (randn(&[h]) + 1.0).unwrap(),
        randn(&[h]),
        randn(&[v]),
    ];
    check("condenser_head_ops", &inputs, |x| {
        let head =
            condenser::model::layers::condenser::MlmHead::load(vb_from(&names, &x[3..]), &c)?;
        let joined = Tensor::cat(&[&x[0].narrow(1, 0, 1)?, &x[1].narrow(1, 1, 3)?], 1)?;
        let rows = joined.reshape((8, h))?.index_select(&pos, 0)?;
        head.forward(&rows, &x[2])
    });
}

/// A bf16 / f16 Linear's value and gradients against the f32 Linear's (finite-difference checked
/// above): within the operands' rounding (bf16 keeps 8 significant bits, f16 11), and not equal
/// (the products really ran in the lower precision). Finite differences cannot check it directly:
/// rounding makes the function piecewise constant at the scale of the step.
#[test]
fn low_precision_linear_follows_f32() {
    use condenser::model::kernels::precision::Precision;
    let precisions: &[(Precision, f64)] = if condenser::model::kernels::bf16::supported() {
        &[(Precision::Bf16, 2e-2), (Precision::F16, 3e-3)]
    } else {
        &[(Precision::F16, 3e-3)]
    };
    let (x, w, b, r) = (
        randn(&[3, 5, 40]),
        randn(&[33, 40]),
        randn(&[33]),
        randn(&[3, 5, 33]),
    );
    let run = |p: Precision| {
        let vars: Vec<candle_core::Var> = [&x, &w, &b]
            .iter()
            .map(|t| candle_core::Var::from_tensor(t).unwrap())
            .collect();
        let lin = Linear::new(
            vars[1].as_tensor().clone(),
            Some(vars[2].as_tensor().clone()),
        )
        .with_precision(p)
        .unwrap();
        let y = lin.forward(vars[0].as_tensor()).unwrap();
        let grads = (&y * &r).unwrap().sum_all().unwrap().backward().unwrap();
        let flat = |t: &Tensor| t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        let mut out = vec![flat(&y)];
        out.extend(vars.iter().map(|v| flat(grads.get(v.as_tensor()).unwrap())));
        out
    };
    let want = run(Precision::F32);
    for &(p, tol) in precisions {
        let got = run(p);
        for (name, (g, w)) in ["y", "dx", "dw", "db"].iter().zip(got.iter().zip(&want)) {
            let scale = w.iter().map(|v| v.abs()).fold(0f32, f32::max) as f64;
            let worst = g
                .iter()
                .zip(w)
                .map(|(a, b)| (a - b).abs() as f64 / scale)
                .fold(0f64, f64::max);
            eprintln!("{p:?} {name}: worst error {worst:.2e} of the largest value");
            assert!(worst < tol, "{p:?} {name}: {worst}");
            if *name != "db" {
                assert!(worst > 0.0, "{p:?} {name}: identical to f32");
            }
        }
    }
}
