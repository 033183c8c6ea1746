//! The training engine (src/model/engine) against candle's autograd on all-MiniLM-L6-v2 and real
//! sentences (token types 0 and 1, as pairs have them): the same hidden states and the same
//! gradient for every parameter; against finite differences with dropout on (masks replayed
//! exactly from their seeds); and ids outside the model's tables refused, never a panic.
mod common;
use candle_core::{Device, Tensor, Var};
use condenser::model::engine::cpu::Stack;
use condenser::model::{Bert, Dropout, DropoutRates, ModelFolder, TokenBatch};
use condenser::train::params::{load_trainable, Trainable};
use std::collections::HashMap;

fn minilm() -> (Trainable<Bert>, condenser::tokenize::Tokenizer) {
    let folder = ModelFolder::open(&common::model()).unwrap();
    let cfg = folder.config.clone();
    let t = load_trainable(&folder.weights, &[], &[], 1, &Device::Cpu, |vb| {
        Bert::load(vb, &cfg)
    })
    .unwrap();
    (t, folder.tokenizer().unwrap())
}

/// STSb dev's sentence pairs.
fn stsb_dev() -> condenser::data::Pairs {
    condenser::data::Pairs::read(&common::data("stsb/dev.parquet"), &Default::default()).unwrap()
}

fn sentences(tok: &condenser::tokenize::Tokenizer, n: usize) -> Vec<Vec<u32>> {
    let stsb = stsb_dev();
    stsb.sentence1
        .iter()
        .take(n)
        .map(|t| {
            let mut ids = vec![101u32];
            tok.ids_into(t, &mut ids).unwrap();
            ids.truncate(40);
            ids.push(102);
            ids
        })
        .collect()
}

/// A fixed pseudo-random weight per (row, column) of the hidden states.
fn weights(rows: usize, h: usize) -> Vec<f32> {
    (0..rows * h)
        .map(|i| ((i * 7919 % 1009) as f32 / 1009.0) - 0.5)
        .collect()
}

/// max |a - b| over max |b|, with a floor: the key biases' true gradient is exactly zero (a
/// constant per score row, which softmax removes), so both sides hold rounding noise (~1e-7).
/// Every parameter's gradient from the engine's backward of `fwd` from `dhidden`, by var id.
fn gradients(
    eng: &Stack,
    fwd: condenser::model::engine::cpu::Forward,
    dhidden: Vec<f32>,
    drop: Option<&Dropout>,
) -> HashMap<candle_core::TensorId, Tensor> {
    let mut grads = eng.zero_grads().unwrap();
    eng.backward(fwd, dhidden, Vec::new(), drop, &mut grads)
        .unwrap();
    eng.export(grads)
        .unwrap()
        .into_iter()
        .map(|(p, g)| (p.id(), g))
        .collect()
}

fn max_rel(a: &[f32], b: &[f32]) -> f32 {
    let scale = b.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-2);
    a.iter().zip(b).fold(0f32, |m, (x, y)| m.max((x - y).abs())) / scale
}

#[test]
fn engine_equals_candle_forward_and_every_gradient() {
    let (t, tok) = minilm();
    let bert = &t.model;
    let seqs = sentences(&tok, 6);
    let refs: Vec<&[u32]> = seqs.iter().map(|s| s.as_slice()).collect();
    let h = bert.config.hidden_size;
    // token types as a pair has them: 0 for the first half of each sequence, 1 for the rest
    let types: Vec<Vec<u32>> = seqs
        .iter()
        .map(|s| (0..s.len()).map(|i| (2 * i >= s.len()) as u32).collect())
        .collect();
    let trefs: Vec<&[u32]> = types.iter().map(|s| s.as_slice()).collect();
    let eng = Stack::for_bert(bert).expect("the engine applies on the CPU in f32 with BLAS");
    let fwd = eng.forward(&refs, Some(&trefs), None, None, true).unwrap();
    let p = fwd.packed.clone();
    // candle: padded batch, loss = sum(states * R) over real tokens
    let b = TokenBatch::new(&refs, Some(&trefs), 0, &Device::Cpu).unwrap();
    let states = bert.forward(&b.ids, &b.type_ids, &b.mask).unwrap();
    let len = b.ids.dims()[1];
    let r = weights(p.rows(), h);
    let mut rp = vec![0f32; refs.len() * len * h];
    let mut worst_state = 0f32;
    let cs: Vec<f32> = states.flatten_all().unwrap().to_vec1().unwrap();
    for (i, &n) in p.lens().iter().enumerate() {
        for pos in 0..n {
            let (src, dst) = ((p.offsets()[i] + pos) * h, (i * len + pos) * h);
            rp[dst..dst + h].copy_from_slice(&r[src..src + h]);
            for j in 0..h {
                worst_state = worst_state.max((fwd.hidden[src + j] - cs[dst + j]).abs());
            }
        }
    }
    assert!(worst_state < 2e-5, "hidden states differ by {worst_state}");
    let rt = Tensor::from_vec(rp, (refs.len(), len, h), &Device::Cpu).unwrap();
    let store = (states * rt)
        .unwrap()
        .sum_all()
        .unwrap()
        .backward()
        .unwrap();
    let ours = gradients(&eng, fwd, r, None);
    let vars: Vec<(String, Var)> = condenser::train::params::vars(&t.varmap);
    let mut compared = 0;
    for (name, v) in &vars {
        let Some(theirs) = store.get(v.as_tensor()) else {
            continue;
        };
        let ours = ours
            .get(&v.id())
            .unwrap_or_else(|| panic!("engine: no gradient for {name}"));
        let (a, b): (Vec<f32>, Vec<f32>) = (
            ours.flatten_all().unwrap().to_vec1().unwrap(),
            theirs.flatten_all().unwrap().to_vec1().unwrap(),
        );
        let d = max_rel(&a, &b);
        assert!(d < 2e-4, "{name}: relative difference {d}");
        compared += 1;
    }
    assert_eq!(
        compared,
        5 + 16 * bert.layers.len(),
        "every parameter compared"
    );
}

/// Finite differences of the engine's loss with dropout on (hidden 0.1, attention 0.1): the masks
/// come from seeds, so the function is deterministic and its backward must match it.
#[test]
fn engine_gradients_match_finite_differences_with_dropout() {
    let d = tempfile::tempdir().unwrap();
    let dir = common::tiny_bert(d.path());
    let folder = ModelFolder::open(&dir).unwrap();
    let cfg = folder.config.clone();
    let t = load_trainable(&folder.weights, &[], &[], 1, &Device::Cpu, |vb| {
        Bert::load(vb, &cfg)
    })
    .unwrap();
    let seqs: Vec<Vec<u32>> = vec![
        vec![101, 2023, 2003, 1037, 3231, 102],
        vec![101, 7592, 102],
        vec![101, 2158, 2003, 2652, 1037, 2543, 2000, 102],
    ];
    let refs: Vec<&[u32]> = seqs.iter().map(|s| s.as_slice()).collect();
    let drop = Dropout::new(
        DropoutRates {
            hidden: 0.1,
            attention: 0.1,
        },
        9,
    );
    let eng = Stack::for_bert(&t.model).unwrap();
    let h = cfg.hidden_size;
    let rows: usize = seqs.iter().map(Vec::len).sum();
    let r = weights(rows, h);
    let loss = || -> f64 {
        let f = eng.forward(&refs, None, None, Some(&drop), false).unwrap();
        f.hidden
            .iter()
            .zip(&r)
            .map(|(a, b)| (*a as f64) * (*b as f64))
            .sum()
    };
    let fwd = eng.forward(&refs, None, None, Some(&drop), true).unwrap();
    let ours = gradients(&eng, fwd, r.clone(), Some(&drop));
    let mut checked = 0;
    for (name, v) in condenser::train::params::vars(&t.varmap) {
        if name.contains("word_embeddings") || name.contains("position") {
            continue; // large tables: their gradient is a scatter the others already exercise
        }
        let g: Vec<f32> = ours[&v.id()].flatten_all().unwrap().to_vec1().unwrap();
        let base: Vec<f32> = v.as_tensor().flatten_all().unwrap().to_vec1().unwrap();
        for k in [0, base.len() / 3, base.len() - 1] {
            // small against the tiny model's 0.02-scale weights, whose LayerNorms make the loss
            // curve within a few 1e-2
            let eps = 2e-3f32;
            let set = |x: f32| {
                let mut w = base.clone();
                w[k] = x;
                v.set(&Tensor::from_vec(w, v.shape(), &Device::Cpu).unwrap())
                    .unwrap();
            };
            set(base[k] + eps);
            let up = loss();
            set(base[k] - eps);
            let down = loss();
            set(base[k]);
            let fd = (up - down) / (2.0 * eps as f64);
            let an = g[k] as f64;
            assert!(
                (fd - an).abs() <= 2e-2 * fd.abs().max(an.abs()).max(1e-2),
                "{name}[{k}]: finite difference {fd}, engine {an}"
            );
            checked += 1;
        }
    }
    assert!(checked > 60, "{checked} checks");
}

/// Token, position and type ids outside the model's tables are an error naming them, not a
/// panic (a sequence past the position table used to slice out of bounds).
#[test]
fn ids_outside_the_tables_are_refused() {
    let (t, _) = minilm();
    let eng = Stack::for_bert(&t.model).unwrap();
    let long: Vec<u32> = vec![101; 513];
    type Case<'a> = (&'a [u32], Option<&'a [u32]>, &'a str);
    let cases: [Case; 3] = [
        (&long, None, "513 tokens, the model 512 positions"),
        (&[101, 30522, 102], None, "token id 30522"),
        (&[101, 7, 102], Some(&[0, 2, 0]), "token type 2"),
    ];
    for (ids, types, want) in cases {
        let types = types.map(|t| vec![t]);
        let e = match eng.forward(&[ids], types.as_deref(), None, None, false) {
            Ok(_) => panic!("{want}: accepted"),
            Err(e) => e.to_string(),
        };
        assert!(e.contains(want), "{e}");
    }
}

/// Packed batches are made by one checked constructor (fields private: overlapping offsets from
/// safe code would race the attention's writes), and rows fed to the layers must fill them.
#[test]
fn packed_batches_and_rows_are_checked() {
    use condenser::model::engine::Packed;
    let e = Packed::new(vec![3, 2], &[7]).unwrap_err().to_string();
    assert!(e.contains("1 dropout keys for 2 sequences"), "{e}");
    let p = Packed::new(vec![3, 2], &[7, 8]).unwrap();
    assert_eq!((p.offsets(), p.rows()), (&[0usize, 3][..], 5));
    let (t, _) = minilm();
    let eng = Stack::for_layers(&t.model.layers, condenser::model::Precision::F32).unwrap();
    let e = match eng.forward_rows(vec![0.0; 4 * 384], p, None, false) {
        Ok(_) => panic!("4 rows accepted for 5"),
        Err(e) => e.to_string(),
    };
    assert!(e.contains("for 5 rows of 384"), "{e}");
}

/// The worst |difference| between `enc.encode` (the engine, batches of `batch` texts' worth of
/// tokens) and candle's padded forward of each text alone.
fn encode_vs_candle(enc: &condenser::model::SentenceEncoder, texts: &[&str], batch: usize) -> f32 {
    let got = enc
        .encode(texts, batch, &indicatif::ProgressBar::hidden())
        .unwrap();
    let mut worst = 0f32;
    for (i, t) in texts.iter().enumerate() {
        let ids = enc.token_ids(t).unwrap();
        let want: Vec<f32> = enc
            .embed_t(&[&ids], None)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1()
            .unwrap();
        let row = &got.data[i * got.dim..(i + 1) * got.dim];
        worst = row
            .iter()
            .zip(&want)
            .map(|(a, b)| (a - b).abs())
            .fold(worst, f32::max);
    }
    worst
}

/// Inference through the engine (token-budget batches on every thread, packed pooling, the
/// cross-encoder's head on the `[CLS]` rows) gives candle's padded forward, text by text, in
/// input order: a budget of 2 texts at max length cuts STSb dev into many batches.
#[test]
fn inference_on_the_engine_equals_candle_in_input_order() {
    use condenser::model::layers::cross_encoder::activate;
    use condenser::model::{CrossEncoderModel, SentenceEncoder};
    let stsb = stsb_dev();
    let n = 60;
    let bar = indicatif::ProgressBar::hidden();
    let enc = SentenceEncoder::load(&common::model(), &Device::Cpu).unwrap();
    let texts: Vec<&str> = stsb.sentence1.iter().take(n).map(String::as_str).collect();
    let worst = encode_vs_candle(&enc, &texts, 2);
    assert!(worst < 1e-5, "encoder: worst difference {worst}");

    let d = tempfile::tempdir().unwrap();
    let ce = CrossEncoderModel::load(&common::cross_encoder(d.path()), &Device::Cpu).unwrap();
    assert_eq!(
        Stack::declines(&ce.model.bert.layers),
        None,
        "the engine runs it"
    );
    assert_eq!(
        Stack::declines(&enc.bert.layers),
        None,
        "the engine runs it"
    );
    let pairs: Vec<(&str, &str)> = stsb
        .sentence1
        .iter()
        .zip(&stsb.sentence2)
        .take(n)
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let got = ce.predict(&pairs, 2, &bar).unwrap();
    let mut worst = 0f32;
    for (i, (a, b)) in pairs.iter().enumerate() {
        let batch = ce
            .tok
            .batch(&[ce.tok.encode(a, b).unwrap()], &Device::Cpu)
            .unwrap();
        let want: Vec<f32> = activate(&ce.model.forward_t(&batch, None).unwrap())
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1()
            .unwrap();
        worst = got[i]
            .iter()
            .zip(&want)
            .map(|(a, b)| (a - b).abs())
            .fold(worst, f32::max);
    }
    assert!(worst < 1e-5, "cross-encoder: worst difference {worst}");
}

/// The last layer at each item's first token alone (engine/cpu/first_token.rs: what the
/// cross-encoder's head and CLS pooling read) equals the full forward's first rows, for
/// sequences of one token up to 42 with token types 0 and 1; and a CLS-pooled sentence encoder
/// on the engine equals candle's padded forward, text by text.
#[test]
fn first_token_forward_equals_the_full_forward_at_cls() {
    use condenser::model::{Pooling, SentenceEncoder};
    let (t, tok) = minilm();
    let mut seqs = sentences(&tok, 24);
    seqs.push(vec![101]);
    let types: Vec<Vec<u32>> = seqs
        .iter()
        .map(|s| (0..s.len()).map(|j| (j >= s.len() / 2) as u32).collect())
        .collect();
    let ids: Vec<&[u32]> = seqs.iter().map(Vec::as_slice).collect();
    let ty: Vec<&[u32]> = types.iter().map(Vec::as_slice).collect();
    // the [CLS]-only forward's rows (one an item) against the full forward's at [CLS]: the
    // largest difference
    let first_vs_full = |bert: &Bert| -> f32 {
        let eng = Stack::for_bert(bert).unwrap();
        let (full, first) = eng
            .infer(|run| {
                Ok((
                    run.forward(&ids, Some(&ty))?,
                    run.forward_first(&ids, Some(&ty))?,
                ))
            })
            .unwrap();
        let h = 384;
        assert_eq!(first.len(), seqs.len() * h);
        let mut worst = 0f32;
        for (item, &off) in full.packed.offsets().iter().enumerate() {
            let want = &full.hidden[off * h..(off + 1) * h];
            let got = &first[item * h..(item + 1) * h];
            worst = want
                .iter()
                .zip(got)
                .map(|(a, b)| (a - b).abs())
                .fold(worst, f32::max);
        }
        worst
    };
    let worst = first_vs_full(&t.model);
    assert!(worst < 1e-5, "first-token rows: worst difference {worst}");

    // the [CLS]-only forward on frozen weights made ready (f32 on condenser's kernel, and bf16
    // where the CPU has AVX512-BF16): its q is the last layer's own ready weight, and its rows
    // equal the full forward's at [CLS] in the same precision
    use condenser::model::kernels::{bf16, f32_gemm, precision::Precision};
    let mut precisions = vec![];
    if f32_gemm::chosen() {
        precisions.push((Precision::F32, 1e-5f32));
    } else if !f32_gemm::supported() {
        condenser::runtime::skipped("f32 [CLS]-only on ready weights", "avx2", "no f32 kernel");
    } else {
        // the CPU has the kernel, but its f32 Linears run on the BLAS by default
        // (`isa::own_f32_linears`), so no weights are made ready in f32: not a skip for want
        eprintln!(
            "f32 [CLS]-only on ready weights: not this CPU's default (CONDENSER_F32_GEMM=own)"
        );
    }
    if bf16::supported() {
        precisions.push((Precision::Bf16, 2e-2));
    } else {
        condenser::runtime::skipped("bf16 [CLS]-only path", "avx512bf16", "no AVX512-BF16");
    }
    for (p, tol) in precisions {
        let mut frozen = SentenceEncoder::load(&common::model(), &Device::Cpu).unwrap();
        frozen.bert.set_precision(p).unwrap();
        assert!(frozen.bert.first_token_query_ready(), "{p:?}: q not ready");
        let worst = first_vs_full(&frozen.bert);
        assert!(
            worst < tol,
            "{p:?} first-token rows: worst difference {worst}"
        );
    }

    let mut enc = SentenceEncoder::load(&common::model(), &Device::Cpu).unwrap();
    enc.pooling = Pooling::CLS;
    let stsb = stsb_dev();
    let texts: Vec<&str> = stsb.sentence2.iter().take(30).map(String::as_str).collect();
    let worst = encode_vs_candle(&enc, &texts, 4);
    assert!(worst < 1e-5, "CLS-pooled encoder: worst difference {worst}");
}

/// Inference does not change with the thread count: 1, 2 and 3 threads run the same batches
/// (the cut never depends on the thread count) on different threads, and every embedding and
/// every cross-encoder score is the same bits, in f32 and, where the CPU has AVX512-BF16, in
/// bf16. It failed before each batch's products ran on a serial BLAS: on one thread OpenBLAS's
/// own threads split the GEMMs and changed the bits.
#[test]
fn inference_is_the_same_bits_on_any_thread_count() {
    use condenser::model::kernels::{bf16, precision::Precision};
    use condenser::model::{CrossEncoderModel, SentenceEncoder};
    let stsb = stsb_dev();
    let n = 150;
    let bar = indicatif::ProgressBar::hidden();
    let enc = SentenceEncoder::load(&common::model(), &Device::Cpu).unwrap();
    let enc_bf16 = bf16::supported().then(|| {
        let mut e = SentenceEncoder::load(&common::model(), &Device::Cpu).unwrap();
        e.bert.set_precision(Precision::Bf16).unwrap();
        e
    });
    if enc_bf16.is_none() {
        condenser::runtime::skipped(
            "bf16 inference across thread counts",
            "avx512bf16",
            "this CPU has no AVX512-BF16; f32 was checked",
        );
    }
    let d = tempfile::tempdir().unwrap();
    let ce = CrossEncoderModel::load(&common::cross_encoder(d.path()), &Device::Cpu).unwrap();
    let texts: Vec<&str> = stsb.sentence1.iter().take(n).map(String::as_str).collect();
    let pairs: Vec<(&str, &str)> = texts
        .iter()
        .zip(&stsb.sentence2)
        .map(|(a, b)| (*a, b.as_str()))
        .collect();
    let on = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            let mut embeddings = enc.encode(&texts, 8, &bar).unwrap().data;
            if let Some(e) = &enc_bf16 {
                embeddings.extend(e.encode(&texts, 8, &bar).unwrap().data);
            }
            (embeddings, ce.predict(&pairs, 8, &bar).unwrap())
        })
    };
    let one = on(1);
    for t in [2, 3] {
        let other = on(t);
        assert!(
            one.0
                .iter()
                .zip(&other.0)
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "embeddings differ between 1 and {t} threads"
        );
        assert_eq!(
            one.1, other.1,
            "cross-encoder scores differ between 1 and {t} threads"
        );
    }
}

/// Training in bf16 takes the f32 attention in every pass: GradCache's first pass (no tape) and
/// the taped pass that recomputes it give the same embeddings bit for bit. Before, the tapeless
/// pass took the bf16 attention, so the cached embeddings and the recomputed ones differed.
#[test]
fn a_training_pass_without_a_tape_equals_the_taped_one_in_bf16() {
    use condenser::model::kernels::{bf16, precision::Precision};
    if !bf16::supported() {
        condenser::runtime::skipped(
            "bf16 training passes with and without a tape",
            "avx512bf16",
            "this CPU has no AVX512-BF16",
        );
        return;
    }
    let (mut t, tok) = minilm();
    t.model.set_precision(Precision::Bf16).unwrap();
    let seqs = sentences(&tok, 16);
    let ids: Vec<&[u32]> = seqs.iter().map(Vec::as_slice).collect();
    let eng = Stack::for_bert(&t.model).unwrap();
    let cached = eng.forward(&ids, None, None, None, false).unwrap();
    let taped = eng.forward(&ids, None, None, None, true).unwrap();
    assert!(
        cached.hidden == taped.hidden,
        "the tapeless pass took another attention"
    );
}
