//! Encode throughput of all-MiniLM-L6-v2 on STSb test (both columns, 2,758 sentences, batch 32):
//! sentences/s and GFLOP/s of the model's matmuls. Run by benches/encode_bench.py beside
//! sentence-transformers, or alone: `cargo bench --bench encode`. DTYPE=bf16 runs the Linears'
//! products in bf16 (model/kernels/precision.rs).
use candle_core::Device;
use condenser::data::{PairColumns, Pairs};
use condenser::model::kernels::precision::Precision;
use condenser::model::SentenceEncoder;
use indicatif::ProgressBar;
use std::path::Path;
use std::time::Instant;

fn main() {
    condenser::runtime::tune_allocator(); // as the binary does
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut enc =
        SentenceEncoder::load(&root.join("datasets/model/all-MiniLM-L6-v2"), &Device::Cpu)
            .expect("run datasets/fetch.sh");
    let precision = match std::env::var("DTYPE").as_deref() {
        Ok("bf16") => Precision::Bf16,
        Ok("f16") => Precision::F16,
        Ok("f32") | Err(_) => Precision::F32,
        Ok(other) => panic!("DTYPE={other}: expected f32, bf16 or f16"),
    };
    precision.check_cpu("DTYPE").unwrap();
    enc.bert.set_precision(precision).unwrap();
    let p = Pairs::read(
        &root.join("datasets/data/stsb/test.parquet"),
        &PairColumns::default(),
    )
    .unwrap();
    let texts: Vec<&str> = p
        .sentence1
        .iter()
        .chain(&p.sentence2)
        .map(String::as_str)
        .collect();
    let batch: usize = std::env::var("BATCH")
        .ok()
        .and_then(|b| b.parse().ok())
        .unwrap_or(32);
    // FLOPs of the padded batches the encoder runs (length-sorted, as encode does)
    let mut lens: Vec<usize> = texts
        .iter()
        .map(|t| enc.token_ids(t).unwrap().len())
        .collect();
    lens.sort_unstable_by(|a, b| b.cmp(a));
    let c = &enc.bert.config;
    let (h, i, l) = (
        c.hidden_size as f64,
        c.intermediate_size as f64,
        c.num_hidden_layers as f64,
    );
    let flops: f64 = lens
        .chunks(batch)
        .map(|ch| {
            let (b, s) = (ch.len() as f64, ch[0] as f64);
            l * (2.0 * b * s * (4.0 * h * h + 2.0 * h * i) + 4.0 * b * s * s * h)
        })
        .sum();
    enc.encode(&texts[..64], batch, &ProgressBar::hidden())
        .unwrap(); // warm-up
    let reps = 3;
    let mut best = f64::INFINITY;
    for _ in 0..reps {
        let t = Instant::now();
        enc.encode(&texts, batch, &ProgressBar::hidden()).unwrap();
        best = best.min(t.elapsed().as_secs_f64());
    }
    println!(
        "{{\"cpu\": {:?}, \"matmul\": {:?}, \"precision\": {:?}, \"sentences\": {}, \"batch\": {batch}, \"seconds\": {best:.4}, \"sentences_per_s\": {:.1}, \"gflops\": {:.1}}}",
        condenser::runtime::cpu_model(),
        condenser::model::kernels::blas::describe(),
        precision.name(),
        texts.len(),
        texts.len() as f64 / best,
        flops / best / 1e9
    );
}
