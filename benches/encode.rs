//! Inference throughput of all-MiniLM-L6-v2 and how far it is from the CPU's limit (issue 35), one
//! JSON line a workload:
//! - `stsb`: STSb test sentences (both columns, 2,758), embedded;
//! - `cranfield`: Cranfield's 1,400 abstracts ("title text"), embedded at 256 tokens;
//! - `ce`: STSb test pairs (1,379) scored by a cross-encoder (CE_MODEL, a BertForSequenceClassification
//!   folder; benches/encode_bench.py makes one from MiniLM's weights, out/bench/ce-minilm).
//!
//! Each reports the median of 3 passes after a warm-up: items/s, the model's FLOPs over the real
//! (packed) tokens per second over the whole encode (the cross-encoder's last layer counted as run:
//! at `[CLS]` only, but for its attention's two products over the layer's input rows), the GEMMs
//! alone at the encode's shapes (one serial GEMM a thread, as encode runs them: in f32 on
//! condenser's AVX2 kernel where it is chosen, CONDENSER_F32_GEMM=blas for the BLAS), and the CPU
//! class's peak: threads x FLOPs a cycle x the clock /proc/cpuinfo reports (nominal), and the
//! vector units' rate in the encode's precision measured on every thread at once
//! (`measured_peak_gflops`, the boost clock included: f32 FMAs, or AVX512-BF16's pair products
//! where condenser's bf16 kernel runs, AMX's tile products on AMX; the best of its measurements
//! before the workloads and after each) with the encode's share of it (`of_measured_peak`). Run
//! by benches/encode_bench.py beside sentence-transformers, or alone: `cargo bench --bench
//! encode` (WORKLOAD=stsb,cranfield,ce DTYPE=f32|bf16 BATCH=32).
use candle_core::Device;
use condenser::data::{retrieval, PairColumns, Pairs};
use condenser::model::engine::cpu::Gemm;
use condenser::model::engine::in_threads;
use condenser::model::kernels::blas::blas;
use condenser::model::kernels::precision::{PackedWeight, Precision};
use condenser::model::kernels::{bf16, f32_gemm};
use condenser::model::kernels::{
    isa, precision::bf16_on_amx, precision::bf16_route, precision::Bf16Route,
};
use condenser::model::{BertConfig, CrossEncoderModel, SentenceEncoder};
use indicatif::ProgressBar;
use std::path::Path;
use std::time::Instant;

/// The clock /proc/cpuinfo reports (MHz; a VM's nominal clock, not the turbo one).
fn mhz() -> f64 {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("cpu MHz"))
                .and_then(|l| l.split(':').nth(1))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0.0)
}

/// FLOPs a cycle a core in `p`, and how the figure was reached: 2 FMA ports of the vector width
/// for f32 (AMD Zen 4 runs AVX-512 on 256-bit halves), twice that for AVX512-BF16's pair
/// products, and AMX's tile unit (1,024 bf16 FLOPs a cycle) where bf16 runs on it (condenser's
/// AMX kernel or oneMKL's GEMM).
fn flops_per_cycle(p: Precision) -> (f64, &'static str) {
    let amd_zen4 = isa::amd_zen4();
    let f32_fpc = match isa::active() {
        isa::Isa::Avx512 if amd_zen4 => 32.0,
        isa::Isa::Avx512 => 64.0,
        isa::Isa::Avx2 => 32.0,
        isa::Isa::Baseline => 8.0,
    };
    match p {
        Precision::Bf16 if bf16_on_amx() => (1024.0, "AMX-BF16 tiles"),
        Precision::Bf16 => (2.0 * f32_fpc, "AVX512-BF16 pair products"),
        _ => (f32_fpc, "2 FMA ports"),
    }
}

/// f32 GFLOP/s of the FMA units, measured: every thread at once runs 12 independent chains of
/// vector FMAs (enough to hide the latency on two ports) for ~0.3 s (`threads_gflops`), best of
/// 3. The nominal figure (`flops_per_cycle` x /proc/cpuinfo's clock) misses the boost clock a VM
/// runs at: on a Zen 3 the GEMMs alone ran above it (183 against 156.5 GFLOP/s). None where the
/// class has no vector FMA this bench can run.
fn fma_peak_gflops(threads: usize) -> Option<f64> {
    #[cfg(target_arch = "x86_64")]
    {
        let wide = isa::active() == isa::Isa::Avx512;
        if isa::active() < isa::Isa::Avx2 {
            return None;
        }
        // a 512-bit FMA does twice the lanes in about twice a 256-bit one's slots (Zen 4): half
        // the iterations keep the time alike
        let (lanes, iters) = if wide {
            (16.0, 75_000_000usize)
        } else {
            (8.0, 150_000_000)
        };
        let run = |_| -> Result<(f64, f64), candle_core::Error> {
            let t = Instant::now();
            // SAFETY: the class was detected above (AVX2 + FMA, or AVX-512F)
            let sink = unsafe {
                if wide {
                    fma_chains_avx512(iters)
                } else {
                    fma_chains_avx2(iters)
                }
            };
            std::hint::black_box(sink);
            Ok((2.0 * 12.0 * lanes * iters as f64, t.elapsed().as_secs_f64()))
        };
        Some(best_of_3_gflops(threads, run))
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = threads;
        None
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn fma_chains_avx2(iters: usize) -> f32 {
    use std::arch::x86_64::*;
    let (a, b) = (_mm256_set1_ps(0.999_999), _mm256_set1_ps(1e-7));
    let mut acc = [_mm256_set1_ps(1.0); 12];
    for _ in 0..iters {
        for x in acc.iter_mut() {
            *x = _mm256_fmadd_ps(*x, a, b);
        }
    }
    let mut out = [0f32; 8];
    // SAFETY: out holds 8 floats
    unsafe {
        _mm256_storeu_ps(
            out.as_mut_ptr(),
            acc.iter().fold(acc[0], |s, &x| _mm256_add_ps(s, x)),
        )
    };
    out.iter().sum()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn fma_chains_avx512(iters: usize) -> f32 {
    use std::arch::x86_64::*;
    let (a, b) = (_mm512_set1_ps(0.999_999), _mm512_set1_ps(1e-7));
    let mut acc = [_mm512_set1_ps(1.0); 12];
    for _ in 0..iters {
        for x in acc.iter_mut() {
            *x = _mm512_fmadd_ps(*x, a, b);
        }
    }
    _mm512_reduce_add_ps(acc.iter().fold(acc[0], |s, &x| _mm512_add_ps(s, x)))
}

/// GFLOP/s of the vector units in precision `p`, measured on every thread at once, best of 3:
/// f32's FMAs (`fma_peak_gflops`), or bf16's pair products where condenser's kernel runs them
/// (12 independent chains of `vdpbf16ps` a thread, 64 FLOPs each). The nominal figure missed
/// the boost clock here too: Zen 4's bf16 GEMMs alone ran at 400-420 GFLOP/s against a nominal
/// 332 (issue 35). On AMX, tile products on registers alone (`bf16::amx_register_products`),
/// either route. None where bf16 runs on oneMKL without AMX or the class has no such unit.
fn measured_peak_gflops(p: Precision, threads: usize) -> Option<f64> {
    match p {
        Precision::F32 => fma_peak_gflops(threads),
        #[cfg(target_arch = "x86_64")]
        Precision::Bf16
            if bf16_route() == Bf16Route::Own && bf16::supported() && !bf16_on_amx() =>
        {
            let iters = 50_000_000usize;
            let run = |_| -> Result<(f64, f64), candle_core::Error> {
                let t = Instant::now();
                // SAFETY: AVX512F + AVX512-BF16 checked by bf16::supported
                std::hint::black_box(unsafe { pair_chains_avx512bf16(iters) });
                Ok((64.0 * 12.0 * iters as f64, t.elapsed().as_secs_f64()))
            };
            Some(best_of_3_gflops(threads, run))
        }
        Precision::Bf16 if bf16_on_amx() && bf16::amx_enabled() => {
            // tile products on registers alone: 16 x 16 x 32 multiply-adds each
            let iters = 2_000_000usize;
            let run = |_| -> Result<(f64, f64), candle_core::Error> {
                let t = Instant::now();
                bf16::amx_register_products(iters);
                Ok((4.0 * 16384.0 * iters as f64, t.elapsed().as_secs_f64()))
            };
            Some(best_of_3_gflops(threads, run))
        }
        _ => None,
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bf16")]
fn pair_chains_avx512bf16(iters: usize) -> f32 {
    use std::arch::x86_64::*;
    // bf16 pairs of (1, 1): every lane adds 2 a step; the sum only keeps the loop alive
    let ones: __m512bh = unsafe { std::mem::transmute(_mm512_set1_epi32(0x3f80_3f80)) };
    let mut acc = [_mm512_setzero_ps(); 12];
    for _ in 0..iters {
        for x in acc.iter_mut() {
            *x = _mm512_dpbf16_ps(*x, ones, ones);
        }
    }
    _mm512_reduce_add_ps(acc.iter().fold(acc[0], |s, &x| _mm512_add_ps(s, x)))
}

/// Multiply-add FLOPs of BERT's layers on one sequence of `n` tokens (the four Linears and the
/// two attention products; embeddings, norms and the head are a rounding error).
fn seq_flops(c: &BertConfig, n: usize) -> f64 {
    let (h, i, l, n) = (
        c.hidden_size as f64,
        c.intermediate_size as f64,
        c.num_hidden_layers as f64,
        n as f64,
    );
    l * (2.0 * n * (4.0 * h * h + 2.0 * h * i) + 4.0 * n * n * h)
}

/// `seq_flops` as a `[CLS]`-only head runs it (engine/cpu/first_token.rs): the last layer's
/// attention scores and probability-weighted input rows for every token (heads x h each), the
/// rest of it (q, Wk^T q, the values' projection of the weighted rows, o, FFN) for the first
/// token alone. The figure is the work done, so that GFLOP/s stays a rate comparable with the
/// GEMMs' (sentence-transformers does the whole last layer: its items/s, not FLOPs, are what the
/// ratio compares).
fn cls_flops(c: &BertConfig, n: usize) -> f64 {
    let (h, i, l, heads) = (
        c.hidden_size as f64,
        c.intermediate_size as f64,
        c.num_hidden_layers,
        c.num_attention_heads as f64,
    );
    let last = 2.0 * (5.0 * h * h + 2.0 * h * i) + 4.0 * n as f64 * heads * h;
    seq_flops(
        &BertConfig {
            num_hidden_layers: l - 1,
            ..c.clone()
        },
        n,
    ) + last
}

/// GFLOP/s of the layer's four products at `rows` rows, one serial GEMM a thread at once: each
/// thread makes its operands, runs the four once to warm up, then is timed over 5 rounds; the
/// figure is all threads' FLOPs over the slowest thread's time (operand set-up not timed), best
/// of 3 as the peak is (one measurement on the AMX Xeon's VM read 125 GFLOP/s beside an encode
/// at 194; alone, minutes later, 179-220).
fn gemm_gflops(c: &BertConfig, p: Precision, rows: usize, threads: usize) -> f64 {
    let (h, i) = (c.hidden_size, c.intermediate_size);
    let shapes = [(3 * h, h), (h, h), (i, h), (h, i)]; // (out, in) of qkv, o, intermediate, output
    let run = |_| -> Result<(f64, f64), candle_core::Error> {
        // the engine's own Linear product, as encode calls it: in f32 on condenser's kernel where
        // encode takes it, in bf16 on the weights made ready once (both outside the timing)
        let g = Gemm {
            blas: blas().expect("a BLAS (datasets/fetch.sh)"),
            precision: p,
        };
        // (out, in, x, w, b, w packed) a product
        #[allow(clippy::type_complexity)]
        let ops: Vec<(
            usize,
            usize,
            Vec<f32>,
            Vec<f32>,
            Vec<f32>,
            Option<PackedWeight>,
        )> = shapes
            .iter()
            .map(|&(out, inp)| {
                let x = (0..rows * inp).map(|v| (v % 7) as f32 * 0.1).collect();
                let w: Vec<f32> = (0..out * inp).map(|v| (v % 5) as f32 * 0.01).collect();
                let packed = PackedWeight::ready(p, &w, out, inp);
                (out, inp, x, w, vec![0.5f32; out], packed)
            })
            .collect();
        let round = || -> Result<f64, candle_core::Error> {
            let mut flops = 0.0;
            for (out, inp, x, w, b, packed) in &ops {
                let (out, inp) = (*out, *inp);
                std::hint::black_box(g.linear(x, w, b, packed.as_ref(), (rows, out, inp))?);
                flops += 2.0 * (rows * out * inp) as f64;
            }
            Ok(flops)
        };
        round()?; // warm-up
        let t = Instant::now();
        let mut flops = 0.0;
        for _ in 0..5 {
            flops += round()?;
        }
        Ok((flops, t.elapsed().as_secs_f64()))
    };
    best_of_3_gflops(threads, run)
}

/// `run` (FLOPs done, seconds) on `threads` threads at once: all threads' FLOPs over the slowest
/// thread's time, in GFLOP/s.
fn threads_gflops(
    threads: usize,
    run: impl Fn(usize) -> Result<(f64, f64), candle_core::Error> + Sync,
) -> f64 {
    let done = in_threads(threads, run).unwrap();
    let flops: f64 = done.iter().map(|d| d.0).sum();
    let slowest = done.iter().map(|d| d.1).fold(0.0, f64::max);
    flops / slowest / 1e9
}

/// `threads_gflops` of `run`, best of 3 rounds: a round another process shares a core with
/// reads low, none reads high.
fn best_of_3_gflops(
    threads: usize,
    run: impl Fn(usize) -> Result<(f64, f64), candle_core::Error> + Sync,
) -> f64 {
    (0..3)
        .map(|_| threads_gflops(threads, &run))
        .fold(0.0, f64::max)
}

/// The median of 3 timed passes of `f` after one warm-up pass, in seconds (a figure is never
/// the best run: issue 80).
fn median_of_3(mut f: impl FnMut()) -> f64 {
    f();
    let mut t: Vec<f64> = (0..3)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[1]
}

fn main() {
    // the process's settings as the binary makes them (src/main.rs): the allocator, OpenBLAS's
    // kernel and candle's serial pool (until 2026-11-27 the bench ran the libraries' defaults)
    condenser::runtime::tune_allocator();
    condenser::model::kernels::blas::prepare_env();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let precision = match std::env::var("DTYPE").as_deref() {
        Ok("bf16") => Precision::Bf16,
        Ok("f16") => Precision::F16,
        Ok("f32") | Err(_) => Precision::F32,
        Ok(other) => panic!("DTYPE={other}: expected f32, bf16 or f16"),
    };
    precision.check_cpu("DTYPE").unwrap();
    let batch: usize = std::env::var("BATCH")
        .ok()
        .and_then(|b| b.parse().ok())
        .unwrap_or(32);
    let workloads = std::env::var("WORKLOAD").unwrap_or("stsb,cranfield,ce".into());
    let threads = rayon::current_num_threads();
    let model = root.join("datasets/model/all-MiniLM-L6-v2");
    let stsb = Pairs::read(
        &root.join("datasets/data/stsb/test.parquet"),
        &PairColumns::default(),
    )
    .expect("run datasets/fetch.sh");
    let (fpc, how) = flops_per_cycle(precision);
    let peak = threads as f64 * fpc * mhz() / 1e3;
    // measured on every thread before the workloads and again after each: the largest so far.
    // A VM's clock moved 184-318 GFLOP/s between runs (an AMX Xeon, 2026-11-29), and a peak from
    // a slow moment gave an encode 1.06 of it
    let mut unit_peak = measured_peak_gflops(precision, threads);
    for w in workloads.split(',') {
        let (items, tokens, flops, seconds, rows, c) = match w {
            "stsb" | "cranfield" => {
                let mut enc = SentenceEncoder::load(&model, &Device::Cpu).unwrap();
                enc.bert.set_precision(precision).unwrap();
                let texts: Vec<String> = if w == "stsb" {
                    stsb.sentence1
                        .iter()
                        .chain(&stsb.sentence2)
                        .cloned()
                        .collect()
                } else {
                    enc.max_seq_length = 256;
                    let corpus =
                        retrieval::find_file(&root.join("datasets/data/cranfield"), "corpus");
                    retrieval::read_texts(&corpus.unwrap())
                        .unwrap()
                        .into_iter()
                        .map(|d| d.1)
                        .collect()
                };
                let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
                let lens: Vec<usize> = texts
                    .iter()
                    .map(|t| enc.token_ids(t).unwrap().len())
                    .collect();
                let c = enc.bert.config.clone();
                let s = median_of_3(|| {
                    enc.encode(&texts, batch, &ProgressBar::hidden()).unwrap();
                });
                let budget = condenser::model::encoder::token_budget(batch, enc.max_seq_length);
                (
                    texts.len(),
                    lens.iter().sum::<usize>(),
                    lens.iter().map(|&n| seq_flops(&c, n)).sum::<f64>(),
                    s,
                    budget,
                    c,
                )
            }
            "ce" => {
                let dir = std::env::var("CE_MODEL")
                    .map(std::path::PathBuf::from)
                    .unwrap_or(root.join("out/bench/ce-minilm"));
                if !dir.join("config.json").is_file() {
                    eprintln!(
                        "ce: skipped: no cross-encoder at {} (benches/encode_bench.py makes one)",
                        dir.display()
                    );
                    continue;
                }
                let mut ce = CrossEncoderModel::load(&dir, &Device::Cpu).unwrap();
                ce.model.set_precision(precision).unwrap();
                let pairs: Vec<(&str, &str)> = stsb
                    .sentence1
                    .iter()
                    .zip(&stsb.sentence2)
                    .map(|(a, b)| (a.as_str(), b.as_str()))
                    .collect();
                let lens: Vec<usize> = pairs
                    .iter()
                    .map(|(a, b)| ce.tok.encode(a, b).unwrap().0.len())
                    .collect();
                let c = ce.model.bert.config.clone();
                let s = median_of_3(|| {
                    ce.predict(&pairs, batch, &ProgressBar::hidden()).unwrap();
                });
                let budget = condenser::model::encoder::token_budget(batch, ce.tok.max_seq_length);
                (
                    pairs.len(),
                    lens.iter().sum::<usize>(),
                    lens.iter().map(|&n| cls_flops(&c, n)).sum::<f64>(),
                    s,
                    budget,
                    c,
                )
            }
            other => panic!("WORKLOAD={other}: expected stsb, cranfield or ce"),
        };
        unit_peak = match (unit_peak, measured_peak_gflops(precision, threads)) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        let unit_json = unit_peak.map_or("null".to_string(), |g| format!("{g:.1}"));
        // the GEMMs at the rows of a full batch a thread (or all the tokens, where fewer)
        let gemm = gemm_gflops(
            &c,
            precision,
            rows.min(tokens / threads.max(1)).max(1),
            threads,
        );
        println!(
            "{{\"workload\": {w:?}, \"cpu\": {:?}, \"class\": {:?}, \"matmul\": {:?}, \"precision\": {:?}, \"threads\": {threads}, \"batch\": {batch}, \"items\": {items}, \"tokens\": {tokens}, \"seconds\": {seconds:.4}, \"items_per_s\": {:.1}, \"gflops\": {:.1}, \"gemm_gflops\": {gemm:.1}, \"peak_gflops\": {peak:.1}, \"peak\": \"{threads} threads x {fpc} FLOPs/cycle ({how}) x {:.0} MHz\", \"measured_peak_gflops\": {unit_json}, \"of_measured_peak\": {}}}",
            condenser::runtime::cpu_model(),
            isa::describe(),
            match f32_gemm::runs_here() {
                Some(what) if precision == Precision::F32 => format!(
                    "{} ({what}); {} (the rest)",
                    f32_gemm::describe(),
                    condenser::model::kernels::blas::describe()
                ),
                _ => condenser::model::kernels::blas::describe(),
            },
            precision.name(),
            items as f64 / seconds,
            flops / seconds / 1e9,
            mhz(),
            unit_peak.map_or("null".to_string(), |g| format!("{:.3}", flops / seconds / 1e9 / g)),
        );
    }
}
