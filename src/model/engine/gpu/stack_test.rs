//! The GPU engine's whole BERT (stack.rs) on the emulated device against the CPU engine
//! (`cpu::Stack::forward` / `backward` / `export`) on one model and batch: the last layer's rows and
//! every parameter's gradient, with dropout at every site, token types, repeated tokens; and a
//! second step of the same size allocates nothing on the device.
use super::assert_close as close;
use super::device::{Buf, Device};
use super::emulated::Emulated;
use super::stack::Stack;
use crate::model::engine::cpu;
use crate::model::kernels::test_data;
use crate::model::{Bert, BertConfig, Dropout, DropoutRates};
use candle_core::{DType, Device as Candle, Tensor};
use std::collections::HashMap;

/// A BERT of `layers` layers, hidden `heads` x `dim`, with deterministic weights on `on`.
fn tiny_bert(layers: usize, heads: usize, dim: usize, on: &Candle) -> Bert {
    let (h, i) = (heads * dim, 2 * heads * dim);
    let cfg: BertConfig = serde_json::from_value(serde_json::json!({
        "vocab_size": 40, "hidden_size": h, "num_hidden_layers": layers,
        "num_attention_heads": heads, "intermediate_size": i, "max_position_embeddings": 48,
        "layer_norm_eps": 1e-12
    }))
    .unwrap();
    let mut seed = 0u32;
    let mut t = |shape: &[usize], scale: f32, offset: f32| {
        seed += 1;
        let n = shape.iter().product();
        let v: Vec<f32> = test_data(n, seed)
            .iter()
            .map(|x| offset + scale * x)
            .collect();
        Tensor::from_vec(v, shape, on).unwrap()
    };
    let mut w: HashMap<String, Tensor> = HashMap::new();
    w.insert(
        "embeddings.word_embeddings.weight".into(),
        t(&[40, h], 1.0, 0.0),
    );
    w.insert(
        "embeddings.position_embeddings.weight".into(),
        t(&[48, h], 0.5, 0.0),
    );
    w.insert(
        "embeddings.token_type_embeddings.weight".into(),
        t(&[2, h], 0.5, 0.0),
    );
    w.insert("embeddings.LayerNorm.weight".into(), t(&[h], 0.2, 1.0));
    w.insert("embeddings.LayerNorm.bias".into(), t(&[h], 0.1, 0.0));
    for l in 0..layers {
        let p = format!("encoder.layer.{l}");
        for (n, shape) in [
            ("attention.self.query", [h, h]),
            ("attention.self.key", [h, h]),
            ("attention.self.value", [h, h]),
            ("attention.output.dense", [h, h]),
            ("intermediate.dense", [i, h]),
            ("output.dense", [h, i]),
        ] {
            w.insert(format!("{p}.{n}.weight"), t(&shape, 0.2, 0.0));
            w.insert(format!("{p}.{n}.bias"), t(&[shape[0]], 0.1, 0.0));
        }
        for n in ["attention.output.LayerNorm", "output.LayerNorm"] {
            w.insert(format!("{p}.{n}.weight"), t(&[h], 0.2, 1.0));
            w.insert(format!("{p}.{n}.bias"), t(&[h], 0.1, 0.0));
        }
    }
    let vb = candle_nn::VarBuilder::from_tensors(w, DType::F32, on);
    Bert::load(vb, &cfg).unwrap()
}

#[test]
fn a_whole_bert_matches_the_cpu_engine() {
    let Some(dev) = Emulated::for_test("the emulated GPU stack") else {
        return;
    };
    let bert = tiny_bert(2, 2, 32, &Candle::Cpu);
    stack_matches(dev, &bert, &bert, &Candle::Cpu);
}

/// The same on a GPU (a `cuda` build's test binary on the lent machine): the model's weights
/// on the GPU, the CPU engine's copy on the CPU.
#[cfg(feature = "cuda")]
#[test]
fn a_whole_bert_on_the_gpu_matches_the_cpu_engine() {
    let Some((gpu, ref cd)) = super::test_gpu("the GPU stack on a GPU") else {
        return;
    };
    let dev = super::cuda::Cuda::new(cd).unwrap();
    let (on_gpu, on_cpu) = (tiny_bert(2, 2, 32, &gpu), tiny_bert(2, 2, 32, &Candle::Cpu));
    stack_matches(dev, &on_gpu, &on_cpu, &gpu);
}

/// `gpu_bert` on `dev` against the CPU engine on `cpu_bert` (the same weights): two steps. The
/// gradient arena lives where `gpu_bert`'s weights do (`arena`: the GPU's device on a GPU).
fn stack_matches<D: Device>(dev: D, gpu_bert: &Bert, cpu_bert: &Bert, arena: &Candle) {
    let h = 64;
    let seqs: Vec<Vec<u32>> = vec![
        vec![1, 7, 7, 9, 3, 2],
        vec![1, 5, 2],
        (0..37).map(|j| (j * 11 % 40) as u32).collect(),
        vec![1],
    ];
    let types: Vec<Vec<u32>> = seqs
        .iter()
        .map(|s| (0..s.len()).map(|j| (j * 2 >= s.len()) as u32).collect())
        .collect();
    let (ids, tys): (Vec<&[u32]>, Vec<&[u32]>) = (
        seqs.iter().map(Vec::as_slice).collect(),
        types.iter().map(Vec::as_slice).collect(),
    );
    let keys = [90u64, 91, 92, 93];
    let drop = Dropout::new(
        DropoutRates {
            hidden: 0.1,
            attention: 0.1,
        },
        17,
    );
    let rows: usize = seqs.iter().map(Vec::len).sum();
    let dh = test_data(rows * h, 77);

    let eng = cpu::Stack::for_bert(cpu_bert).unwrap();
    let fwd = eng
        .forward(&ids, Some(&tys), Some(&keys), Some(&drop), true)
        .unwrap();
    let hidden = fwd.hidden.clone();
    let mut grads = eng.zero_grads().unwrap();
    eng.backward(fwd, dh.clone(), Vec::new(), Some(&drop), &mut grads)
        .unwrap();
    let want = eng.export(grads).unwrap();

    let mut stack = Stack::new(dev, gpu_bert).unwrap();
    let mut g = stack.zero_grads(arena).unwrap();
    let dbuf = Buf::of(stack.device(), &dh).unwrap();
    let mut allocated = Vec::new();
    for step in 0..2 {
        g.restart(stack.device()).unwrap();
        let at = stack
            .forward(gpu_bert, &ids, Some(&tys), Some(&keys), Some(&drop))
            .unwrap();
        let mut bytes = vec![0u8; 4 * rows * h];
        stack.device().download(at, &mut bytes).unwrap();
        let got: Vec<f32> = bytemuck::cast_slice(&bytes).to_vec();
        close(&format!("hidden, step {step}"), &got, &hidden, 1e-4);
        stack
            .backward(gpu_bert, dbuf.at(0), Some(&drop), &g)
            .unwrap();
        allocated.push(stack.device().counts().allocations);
        let ours = g.export_host(stack.device(), gpu_bert).unwrap();
        assert_eq!(ours.len(), want.len());
        for (k, ((t, v), (wt, wv))) in ours.iter().zip(&want).enumerate() {
            assert_eq!(t.dims(), wt.dims(), "parameter {k}: another tensor");
            let wv: Vec<f32> = wv.flatten_all().unwrap().to_vec1().unwrap();
            close(&format!("gradient {k}, step {step}"), v, &wv, 1e-4);
        }
    }
    assert_eq!(
        allocated[0], allocated[1],
        "the second step of the same size allocated on the device"
    );
}

/// A loss in candle over the engine's leaf (mean pooling, then a fixed weighting of the pooled
/// rows): the GPU engine's leaf and export, on the emulated device, give the CPU engine's leaf's
/// gradients for every parameter.
#[test]
fn a_candle_loss_over_the_leaf_matches_the_cpu_engine() {
    use crate::model::engine::cpu;
    let Some(dev) = Emulated::for_test("the emulated GPU leaf") else {
        return;
    };
    let bert = tiny_bert(2, 1, 64, &Candle::Cpu);
    let seqs: Vec<Vec<u32>> = vec![
        vec![1, 4, 9, 2],
        (0..21).map(|j| (j * 3 % 40) as u32).collect(),
        vec![1, 2],
    ];
    let ids: Vec<&[u32]> = seqs.iter().map(Vec::as_slice).collect();
    let keys = [5u64, 6, 7];
    let drop = Dropout::new(
        DropoutRates {
            hidden: 0.1,
            attention: 0.1,
        },
        3,
    );
    let r = Tensor::from_vec(test_data(3 * 64, 8), (3, 64), &Candle::Cpu).unwrap();
    let loss = |states: &Tensor, mask: &Tensor| -> Tensor {
        let m = mask.to_dtype(DType::F32).unwrap().unsqueeze(2).unwrap();
        let sum = states.broadcast_mul(&m).unwrap().sum(1).unwrap();
        let pooled = sum.broadcast_div(&m.sum(1).unwrap()).unwrap();
        (pooled * &r).unwrap().sum_all().unwrap()
    };

    let eng = cpu::Stack::for_bert(&bert).unwrap();
    let leaf = cpu::Leaf::forward(&eng, &ids, None, &keys, Some(&drop)).unwrap();
    let l = loss(leaf.states.as_tensor(), &leaf.mask);
    let store = l.backward().unwrap();
    let mut grads = eng.zero_grads().unwrap();
    leaf.backward(&eng, &store, Some(&drop), &mut grads)
        .unwrap();
    let want = eng.export(grads).unwrap();

    let mut stack = Stack::new(dev, &bert).unwrap();
    let g = stack.zero_grads(&Candle::Cpu).unwrap();
    let leaf = super::leaf::Leaf::forward(
        &mut stack,
        &bert,
        &ids,
        None,
        &keys,
        Some(&drop),
        &Candle::Cpu,
    )
    .unwrap();
    let ours_loss = loss(leaf.states.as_tensor(), &leaf.mask);
    let value = |t: &Tensor| t.to_scalar::<f32>().unwrap();
    assert!((value(&ours_loss) - value(&l)).abs() <= 1e-4 * value(&l).abs().max(1.0));
    let store = ours_loss.backward().unwrap();
    leaf.backward(&mut stack, &bert, &store, Some(&drop), &g)
        .unwrap();
    let (ours, _lease) = g.export(&bert).unwrap();
    assert_eq!(ours.len(), want.len());
    for (k, ((t, v), (wt, wv))) in ours.iter().zip(&want).enumerate() {
        assert_eq!(t.id(), wt.id(), "parameter {k}: another tensor");
        let (v, wv): (Vec<f32>, Vec<f32>) = (
            v.flatten_all().unwrap().to_vec1().unwrap(),
            wv.flatten_all().unwrap().to_vec1().unwrap(),
        );
        close(&format!("gradient {k} through the leaf"), &v, &wv, 1e-4);
    }
}

/// The exported gradients are views of the arena (no copy, the values `export_host` reads),
/// reused in place by the next batch once no export is held, and left alone (a new arena) while
/// one is: a batch's gradients held for a sum over micro-batches keep their values through the
/// next batch's backward.
#[test]
fn exported_gradients_are_views_kept_while_held() {
    use super::grads::Grads;
    let Some(dev) = Emulated::for_test("the emulated GPU arena") else {
        return;
    };
    let bert = tiny_bert(1, 1, 32, &Candle::Cpu);
    let mut stack = Stack::new(dev, &bert).unwrap();
    let mut g = stack.zero_grads(&Candle::Cpu).unwrap();
    let batch = |stack: &mut Stack<Emulated>, g: &mut Grads<Emulated>, seq: &[u32]| {
        g.restart(stack.device()).unwrap();
        stack.forward(&bert, &[seq], None, None, None).unwrap();
        let dh = Buf::of(stack.device(), &test_data(seq.len() * 32, seq.len() as u32)).unwrap();
        stack.backward(&bert, dh.at(0), None, g).unwrap();
        g.export(&bert).unwrap()
    };
    let values = |pairs: &[(Tensor, Tensor)]| -> Vec<Vec<f32>> {
        pairs
            .iter()
            .map(|(_, v)| v.flatten_all().unwrap().to_vec1().unwrap())
            .collect()
    };
    // the arena's start: the word embeddings' gradient comes first
    let start = |stack: &Stack<Emulated>, pairs: &[(Tensor, Tensor)]| {
        stack.device().tensor_addr(&pairs[0].1).unwrap()
    };
    let (a, lease_a) = batch(&mut stack, &mut g, &[1, 5, 9, 2]);
    let want_a = values(&a);
    let host = g.export_host(stack.device(), &bert).unwrap();
    assert_eq!(host.len(), want_a.len());
    for (k, ((_, h), w)) in host.iter().zip(&want_a).enumerate() {
        assert_eq!(h, w, "parameter {k}: the view is not the arena's values");
    }
    assert!(want_a.iter().flatten().any(|&x| x != 0.0), "no gradient");

    let (b, lease_b) = batch(&mut stack, &mut g, &[1, 7, 3]);
    assert_eq!(
        values(&a),
        want_a,
        "a held export changed under the next batch"
    );
    let want_b = values(&b);
    assert_ne!(want_b, want_a, "another batch, the same gradients");
    let at_b = start(&stack, &b);
    assert_ne!(start(&stack, &a), at_b, "a held arena was written again");

    drop((a, lease_a, b, lease_b));
    let (c, _lease) = batch(&mut stack, &mut g, &[1, 7, 3]);
    assert_eq!(start(&stack, &c), at_b, "a free arena was not reused");
    // the same batch again: the arena was zeroed before it, not added to
    assert_eq!(
        values(&c),
        want_b,
        "the reused arena kept the last batch's gradients"
    );
}

/// A stack for inference (`Stack::for_inference`: two tapes in turn, no backward buffers)
/// forwards the same bits as the training stack on a three-layer BERT (an odd count, so the
/// last layer writes from the first tape again), in f32 and bf16, allocates less, and refuses a
/// backward before it writes anything.
#[test]
fn an_inference_stack_forwards_the_same_bits_in_less_memory() {
    use crate::model::kernels::precision::Precision;
    let check = "the emulated GPU stack for inference";
    if Emulated::for_test(check).is_none() {
        return;
    }
    let mut bert = tiny_bert(3, 2, 32, &Candle::Cpu);
    let seqs: Vec<Vec<u32>> = vec![vec![1, 7, 7, 9, 3, 2], (0..29).map(|j| j % 40).collect()];
    let ids: Vec<&[u32]> = seqs.iter().map(Vec::as_slice).collect();
    let rows = 4 * 64 * 35;
    for p in [Precision::F32, Precision::Bf16] {
        bert.set_precision(p).unwrap();
        let mut hidden = Vec::new();
        let mut bytes = Vec::new();
        for inference in [false, true] {
            let dev = Emulated::for_test(check).expect("found above");
            let mut stack = if inference {
                Stack::for_inference(dev, &bert).unwrap()
            } else {
                Stack::new(dev, &bert).unwrap()
            };
            let before = stack.device().counts();
            let at = stack.forward(&bert, &ids, None, None, None).unwrap();
            bytes.push((stack.device().counts() - before).bytes);
            let mut got = vec![0u8; rows];
            stack.device().download(at, &mut got).unwrap();
            hidden.push(got);
            let g = stack.zero_grads(&Candle::Cpu).unwrap();
            let dh = Buf::of(stack.device(), &vec![1f32; rows / 4]).unwrap();
            let back = stack.backward(&bert, dh.at(0), None, &g);
            assert_eq!(
                back.is_err(),
                inference,
                "{p:?}: a backward on inference: {back:?}"
            );
        }
        assert!(
            hidden[0] == hidden[1],
            "{p:?}: the inference stack's rows differ"
        );
        eprintln!(
            "{p:?}: one forward allocated {} bytes (inference {})",
            bytes[0], bytes[1]
        );
        assert!(bytes[1] * 10 < bytes[0] * 7, "{p:?}: {bytes:?}");
    }
}

/// `release` (before a training's dev evaluation): the workspace freed, a backward refused until
/// the next forward, which allocates it again and gives the same bits.
#[test]
fn a_released_stack_forwards_the_same_bits_again() {
    let Some(dev) = Emulated::for_test("the emulated GPU stack released") else {
        return;
    };
    let bert = tiny_bert(2, 2, 32, &Candle::Cpu);
    let seqs: Vec<Vec<u32>> = vec![vec![1, 7, 7, 9, 3, 2], (0..19).map(|j| j % 40).collect()];
    let ids: Vec<&[u32]> = seqs.iter().map(Vec::as_slice).collect();
    let bytes = 4 * 64 * 25;
    let mut stack = Stack::new(dev, &bert).unwrap();
    let mut rows = [vec![0u8; bytes], vec![0u8; bytes]];
    let mut allocated = Vec::new();
    for (i, got) in rows.iter_mut().enumerate() {
        if i == 1 {
            stack.release();
            let g = stack.zero_grads(&Candle::Cpu).unwrap();
            let dh = Buf::of(stack.device(), &vec![1f32; bytes / 4]).unwrap();
            assert!(
                stack.backward(&bert, dh.at(0), None, &g).is_err(),
                "a backward after release"
            );
        }
        let before = stack.device().counts();
        let at = stack.forward(&bert, &ids, None, None, None).unwrap();
        allocated.push((stack.device().counts() - before).allocations);
        stack.device().download(at, got).unwrap();
    }
    assert!(rows[0] == rows[1], "the rows after release differ");
    assert!(
        allocated[0] > 0 && allocated[1] > 0,
        "the workspace was not made again: {allocated:?}"
    );
}
