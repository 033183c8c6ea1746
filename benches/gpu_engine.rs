//! The GPU engine's training step against candle's graph on one GPU (issue 57, item 1), same
//! process, routes alternating: all-MiniLM-L6-v2 on STSb train's first 64 pairs as MNR embeds
//! them (both columns: 128 sequences), a forward with BERT's dropout and a backward from a fixed
//! gradient of the last layer's rows, every parameter's gradient computed. Prints each route's
//! median milliseconds a step, the ratio, and the engine's own launches and device allocations a
//! step (candle's route: scripts/gpu-step-anatomy.sh counts it with cuhook); then the engine's
//! step under --precision bf16 (bf16 products, cublasGemmEx) against the same candle figure.
//!   cargo bench --features cuda --bench gpu_engine --no-run   # here (build-cuda.sh's env)
//!   target/release/deps/gpu_engine-* [MODEL_DIR] [STSB_TRAIN_PARQUET] [STEPS]   # on the GPU
use candle_core::{Device, Tensor};
use condenser::model::engine::gpu::{Buf, Cuda, Device as _, Stack};
use condenser::model::{Bert, Dropout, ModelFolder, TokenBatch};
use condenser::train::params::load_trainable;
use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let model = args
        .next()
        .unwrap_or_else(|| "datasets/model/all-MiniLM-L6-v2".into());
    let data = args
        .next()
        .unwrap_or_else(|| "datasets/data/stsb/train.parquet".into());
    let steps: usize = args.next().map_or(Ok(20), |s| s.parse())?;
    let gpu = Device::new_cuda(0)?;
    let Device::Cuda(cd) = &gpu else {
        unreachable!("new_cuda gives a CUDA device")
    };
    let folder = ModelFolder::open(std::path::Path::new(&model))?;
    let cfg = folder.config.clone();
    let t = load_trainable(&folder.weights, &[], &[], 1, &gpu, |vb| {
        Bert::load(vb, &cfg)
    })?;
    let mut t = t;
    let tok = folder.tokenizer()?;
    let pairs = condenser::data::Pairs::read(std::path::Path::new(&data), &Default::default())?;
    let mut seqs: Vec<Vec<u32>> = Vec::new();
    for text in pairs
        .sentence1
        .iter()
        .take(64)
        .chain(pairs.sentence2.iter().take(64))
    {
        let mut ids = vec![101u32];
        tok.ids_into(text, &mut ids)?;
        ids.truncate(127);
        ids.push(102);
        seqs.push(ids);
    }
    let refs: Vec<&[u32]> = seqs.iter().map(Vec::as_slice).collect();
    let keys: Vec<u64> = (0..refs.len() as u64).collect();
    let rows: usize = seqs.iter().map(Vec::len).sum();
    let h = cfg.hidden_size;
    let drop = Dropout::new(cfg.dropout_rates(), 7);
    let r: Vec<f32> = (0..rows * h)
        .map(|i| ((i * 7919 % 1009) as f32 / 1009.0) - 0.5)
        .collect();

    let mut bert = &t.model;
    let dev = Cuda::new(cd)?;
    let mut stack = Stack::new(dev, bert)?;
    let mut grads = stack.zero_grads(&gpu)?;
    let dh = Buf::of(stack.device(), &r)?;
    let mut engine_step = |stack: &mut Stack<Cuda>, bert: &Bert| -> candle_core::Result<()> {
        grads.restart(stack.device())?;
        stack.forward(bert, &refs, None, Some(&keys), Some(&drop))?;
        stack.backward(bert, dh.at(0), Some(&drop), &grads)?;
        // waits for the step's work
        stack.device().download(dh.at(0), &mut [0u8; 4])
    };

    // candle: the padded batch through the graph, loss = sum(states * R) over every position
    let b = TokenBatch::new(&refs, None, 0, &gpu)?;
    let (bsz, len) = b.ids.dims2()?;
    let rp = Tensor::from_vec(
        (0..bsz * len * h)
            .map(|i| ((i * 7919 % 1009) as f32 / 1009.0) - 0.5)
            .collect::<Vec<f32>>(),
        (bsz, len, h),
        &gpu,
    )?;
    let candle_step = || -> candle_core::Result<()> {
        let states = bert.forward_t(&b.ids, &b.type_ids, &b.mask, Some(&drop))?;
        let loss = (states * &rp)?.sum_all()?;
        let store = loss.backward()?;
        drop_store(store);
        gpu.synchronize()
    };

    for _ in 0..3 {
        engine_step(&mut stack, bert)?;
        candle_step()?;
    }
    let before = stack.device().counts();
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for _ in 0..steps {
        let s = Instant::now();
        engine_step(&mut stack, bert)?;
        ours.push(s.elapsed().as_secs_f64() * 1e3);
        let s = Instant::now();
        candle_step()?;
        theirs.push(s.elapsed().as_secs_f64() * 1e3);
    }
    let spent = stack.device().counts() - before;
    let (o, c) = (median(ours), median(theirs));
    println!(
        "gpu engine step: {o:.2} ms; candle's graph {c:.2} ms; {:.2}x ({} sequences, {rows} tokens, {steps} steps each)",
        c / o,
        refs.len()
    );
    println!(
        "engine launches a step (kernels, GEMMs, copies, fills): {:.1}; device allocations after the warm-up: {}",
        spent.launches as f64 / steps as f64,
        spent.allocations
    );

    // --precision bf16: the engine's products on bf16 operands (candle's graph on a GPU is f32)
    t.model
        .set_precision(condenser::model::kernels::precision::Precision::Bf16)?;
    bert = &t.model;
    for _ in 0..3 {
        engine_step(&mut stack, bert)?;
    }
    let before = stack.device().counts();
    let mut bf16 = Vec::new();
    for _ in 0..steps {
        let s = Instant::now();
        engine_step(&mut stack, bert)?;
        bf16.push(s.elapsed().as_secs_f64() * 1e3);
    }
    let spent = stack.device().counts() - before;
    let b = median(bf16);
    println!(
        "gpu engine step in bf16: {b:.2} ms ({:.2}x candle's f32 graph, {:.2}x the engine's f32); launches a step {:.1}; allocations after the warm-up: {}",
        c / b,
        o / b,
        spent.launches as f64 / steps as f64,
        spent.allocations
    );
    Ok(())
}

/// Frees candle's gradients (kept apart so the step reads as the trainer's).
fn drop_store(_: candle_core::backprop::GradStore) {}
