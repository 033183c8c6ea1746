//! Condenser pre-training on a tiny random BERT and real text: masking statistics, the head's
//! input, one MLM head shared by both losses, and an exported backbone that reloads bit-exact.
mod common;
use candle_core::{Device, Tensor};
use condenser::model::{ModelFolder, TokenBatch};
use condenser::tokenize::Tokenizer;
use condenser::train::corpus::Blocks;
use condenser::train::masking::Masker;
use condenser::train::params;
use condenser::train::pretrain::{HeadInit, PretrainSpec, PretrainTask};
use condenser::train::TrainTask;
use rand::SeedableRng;

fn brown_texts(n: usize) -> Vec<String> {
    let b = condenser::data::open(&common::brown("news"), &["text"]).unwrap();
    b.flat_map(|b| {
        b.unwrap()
            .texts("text")
            .unwrap()
            .into_iter()
            .map(String::from)
            .collect::<Vec<_>>()
    })
    .take(n)
    .collect()
}

/// MiniLM's tokenizer, its masker, and its [CLS] and [SEP] ids.
fn minilm_masker() -> (Tokenizer, Masker, u32, u32) {
    let tok = ModelFolder::open(&common::model())
        .unwrap()
        .tokenizer()
        .unwrap();
    let m = Masker::new(&tok).unwrap();
    let (cls, sep) = (
        tok.token_id("[CLS]").unwrap(),
        tok.token_id("[SEP]").unwrap(),
    );
    (tok, m, cls, sep)
}

#[test]
fn whole_word_masking_statistics() {
    let (tok, m, cls, sep) = minilm_masker();
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    let (mut maskable, mut picked, mut as_mask, mut as_random, mut kept) =
        (0usize, 0usize, 0usize, 0usize, 0usize);
    for text in brown_texts(3000) {
        let mut ids = vec![cls];
        tok.ids_into(&text, &mut ids).unwrap();
        ids.push(sep);
        let r = m.mask(&ids, &mut rng);
        let words = m.words(&ids);
        maskable += words.iter().map(|w| w.1 - w.0).sum::<usize>();
        picked += r.positions.len();
        for (&p, &t) in r.positions.iter().zip(&r.targets) {
            assert!(!m.is_special(ids[p]), "special token masked");
            assert_eq!(t, ids[p]);
            match r.input[p] {
                x if x == m.mask_id => as_mask += 1,
                x if x == ids[p] => kept += 1,
                _ => as_random += 1,
            }
        }
        // whole words: a word is either entirely picked or not at all
        for (s, e) in words {
            let n = (s..e).filter(|p| r.positions.contains(p)).count();
            assert!(
                n == 0 || n == e - s,
                "word {s}..{e} partly masked in {text}"
            );
        }
        // nothing outside the picked positions changed
        for (i, (&a, &b)) in ids.iter().zip(&r.input).enumerate() {
            assert!(a == b || r.positions.contains(&i));
        }
    }
    let rate = picked as f64 / maskable as f64;
    let f = |x: usize| x as f64 / picked as f64;
    eprintln!(
        "rate {rate:.4}, mask {:.3} random {:.3} kept {:.3}",
        f(as_mask),
        f(as_random),
        f(kept)
    );
    assert!((0.14..0.16).contains(&rate), "masking rate {rate}");
    assert!(
        (f(as_mask) - 0.8).abs() < 0.015
            && (f(as_random) - 0.1).abs() < 0.01
            && (f(kept) - 0.1).abs() < 0.01
    );
}

fn spec(skip_from: usize, cocondenser: Option<usize>, seed: u64) -> PretrainSpec {
    PretrainSpec {
        head_layers: 2,
        skip_from,
        head_mlm: true,
        late_mlm: true,
        cocondenser,
        freeze_backbone: false,
        seed,
    }
}

fn task(dir: &std::path::Path, init: &std::path::Path, seed: u64) -> PretrainTask {
    task_with(dir, init, seed, HeadInit::Fresh)
}

fn task_with(
    dir: &std::path::Path,
    init: &std::path::Path,
    seed: u64,
    head: HeadInit,
) -> PretrainTask {
    let tok = ModelFolder::open(init).unwrap().tokenizer().unwrap();
    let corpus = common::data("wikitext2/valid.parquet");
    let blocks = Blocks::build(
        &[corpus],
        "text",
        &tok,
        32,
        &dir.join("blocks.u32"),
        "test",
        &indicatif::ProgressBar::hidden(),
    )
    .unwrap();
    PretrainTask::new(init, head, blocks, &spec(1, None, seed), &Device::Cpu).unwrap()
}

#[test]
fn head_reads_last_cls_and_early_tokens() {
    let d = tempfile::tempdir().unwrap();
    let tiny = common::tiny_bert(d.path());
    let t = task(d.path(), &tiny, 3);
    let seqs: Vec<Vec<u32>> = (0..3).map(|i| t.blocks.get(i).unwrap()).collect();
    let refs: Vec<&[u32]> = seqs.iter().map(|s| s.as_slice()).collect();
    let b = TokenBatch::new(&refs, None, 0, &Device::Cpu).unwrap();
    let (bs, s) = b.ids.dims2().unwrap();
    let all = Tensor::arange(0u32, (bs * s) as u32, &Device::Cpu).unwrap();
    let out = t.model.forward_t(&b, &all, true, None).unwrap();
    // by hand: [CLS] of the last layer, then layer 1's tokens 1.., through the head layers
    let (states, _) = t
        .model
        .bert
        .forward_all(&b.ids, &b.type_ids, &b.mask)
        .unwrap();
    let manual_in = Tensor::cat(
        &[
            &states[2].narrow(1, 0, 1).unwrap(),
            &states[1].narrow(1, 1, s - 1).unwrap(),
        ],
        1,
    )
    .unwrap();
    let bias = condenser::model::attention_bias(&b.mask, candle_core::DType::F32).unwrap();
    let mut x = manual_in;
    for l in &t.model.head {
        x = l.forward(&x, &bias).unwrap();
    }
    let h = x.dim(2).unwrap();
    let words = t.model.bert.embeddings.word_embeddings();
    let manual = t
        .model
        .mlm
        .forward(&x.reshape((bs * s, h)).unwrap(), words)
        .unwrap();
    let head_logits = out.head_logits.unwrap();
    let diff = condenser::model::max_abs_diff(&manual, &head_logits).unwrap();
    assert!(diff < 1e-5, "head logits differ by {diff}");
    // and not what the last layer alone would give
    let late = condenser::model::max_abs_diff(&out.late_logits.unwrap(), &head_logits).unwrap();
    assert!(late > 1e-3);
}

#[test]
fn both_losses_share_one_mlm_head() {
    let d = tempfile::tempdir().unwrap();
    let tiny = common::tiny_bert(d.path());
    let t = task(d.path(), &tiny, 3);
    let names: Vec<String> = params::vars(t.varmap())
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(
        names
            .iter()
            .filter(|n| n.contains("transform.dense.weight"))
            .count(),
        1
    );
    assert!(
        !names.iter().any(|n| n.contains("decoder")),
        "the decoder is tied, not a parameter"
    );
    let dense = params::vars(t.varmap())
        .into_iter()
        .find(|(n, _)| n == "cls.predictions.transform.dense.weight")
        .unwrap()
        .1;
    let words = params::vars(t.varmap())
        .into_iter()
        .find(|(n, _)| n == "bert.embeddings.word_embeddings.weight")
        .unwrap()
        .1;
    let seqs: Vec<Vec<u32>> = (0..2).map(|i| t.blocks.get(i).unwrap()).collect();
    let refs: Vec<&[u32]> = seqs.iter().map(|s| s.as_slice()).collect();
    let b = TokenBatch::new(&refs, None, 0, &Device::Cpu).unwrap();
    let pos = Tensor::new(&[3u32, 5, 40], &Device::Cpu).unwrap();
    let tgt = Tensor::new(&[7u32, 1000, 2000], &Device::Cpu).unwrap();
    let out = t.model.forward_t(&b, &pos, true, None).unwrap();
    let ce = condenser::train::losses::cross_entropy;
    let norm = |l: Tensor, v: &candle_core::Var| -> f32 {
        let g = l.backward().unwrap();
        g.get(v)
            .map(|g| {
                g.sqr()
                    .unwrap()
                    .sum_all()
                    .unwrap()
                    .to_scalar::<f32>()
                    .unwrap()
            })
            .unwrap_or(0.0)
    };
    let head = ce(out.head_logits.as_ref().unwrap(), &tgt).unwrap();
    let late = ce(&out.late_logits.clone().unwrap(), &tgt).unwrap();
    assert!(
        norm(head.clone(), &dense) > 0.0 && norm(late.clone(), &dense) > 0.0,
        "both losses reach the shared transform"
    );
    assert!(
        norm(head, &words) > 0.0 && norm(late, &words) > 0.0,
        "both reach the tied decoder"
    );
}

#[test]
fn exported_backbone_reloads_bit_exact_and_head_continues() {
    let d = tempfile::tempdir().unwrap();
    let tiny = common::tiny_bert(d.path());
    let t = task(d.path(), &tiny, 3);
    let out = d.path().join("out");
    t.save(&out).unwrap();
    let saved =
        candle_core::safetensors::load(out.join("model.safetensors"), &Device::Cpu).unwrap();
    for (name, var) in params::vars(t.varmap()) {
        if let Some(b) = name.strip_prefix("bert.") {
            let s = saved.get(b).unwrap_or_else(|| panic!("{b} not exported"));
            assert_eq!(
                s.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
                var.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
                "{b}"
            );
        }
    }
    assert!(!saved
        .keys()
        .any(|k| k.starts_with("c_head") || k.starts_with("cls.")));
    // a plain BERT folder: condenser loads it as an encoder
    let bert = ModelFolder::open(&out)
        .unwrap()
        .load_bert(candle_core::DType::F32, &Device::Cpu)
        .unwrap();
    assert_eq!(bert.layers.len(), 2);
    // --continue-from: the head comes back with its trained values, not fresh ones
    let again = task_with(&d.path().join("b").tap_mkdir(), &out, 4, HeadInit::Continue);
    let fresh = task(&d.path().join("c").tap_mkdir(), &tiny, 4);
    // --model on the same folder starts a fresh head: the saved one is not read (it was, silently)
    let model_flag = task(&d.path().join("e").tap_mkdir(), &out, 5);
    let head = |t: &PretrainTask| -> Vec<f32> {
        params::vars(t.varmap())
            .into_iter()
            .find(|(n, _)| n == "c_head.0.attention.self.query.weight")
            .unwrap()
            .1
            .flatten_all()
            .unwrap()
            .to_vec1()
            .unwrap()
    };
    assert_eq!(head(&t), head(&again));
    assert_ne!(head(&t), head(&fresh), "another seed's fresh head differs");
    assert_ne!(head(&t), head(&model_flag), "--model read the saved head");
    assert!(model_flag.fresh().iter().any(|n| n.starts_with("c_head.")));
    assert!(again.fresh().is_empty(), "continuing starts nothing fresh");
}

trait TapMkdir {
    fn tap_mkdir(self) -> Self;
}
impl TapMkdir for std::path::PathBuf {
    fn tap_mkdir(self) -> Self {
        std::fs::create_dir_all(&self).unwrap();
        self
    }
}

fn pretrain(
    tiny: &std::path::Path,
    corpus: &std::path::Path,
    out: &std::path::Path,
    resume: bool,
    extra: &[&str],
) -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_condenser"));
    c.args(["pretrain", "--model"]).arg(tiny);
    c.arg("--corpus").arg(corpus).arg("--out").arg(out);
    c.args([
        "--max-seq-length",
        "32",
        "--batch-size",
        "8",
        "--max-steps",
        "120",
    ]);
    c.args(["--checkpoint-steps", "10", "--epochs", "5"]);
    if resume {
        c.arg("--resume");
    }
    c.args(extra);
    c
}

/// train_log.csv's rows as numbers (an empty eval is NaN), its header checked.
fn log_rows(log: &str, header: &str) -> Vec<Vec<f64>> {
    let mut lines = log.lines();
    assert_eq!(lines.next().unwrap(), header);
    lines
        .map(|l| {
            l.split(',')
                .map(|v| v.parse().unwrap_or(f64::NAN))
                .collect()
        })
        .collect()
}

#[test]
fn both_mlm_losses_are_logged_per_step_and_survive_a_kill() {
    let d = tempfile::tempdir().unwrap();
    let tiny = common::tiny_bert(d.path());
    let corpus = d.path().join("news.txt");
    std::fs::write(&corpus, brown_texts(400).join("\n")).unwrap();
    let (a, b) = (d.path().join("a"), d.path().join("b"));
    let o = pretrain(&tiny, &corpus, &a, false, &["--lr", "1e-3"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let log = std::fs::read_to_string(a.join("train_log.csv")).unwrap();
    let rows = log_rows(&log, "step,loss,lr,eval,head_mlm,late_mlm,seconds");
    assert_eq!(rows.len(), 120);
    for r in &rows {
        assert!(
            (r[1] - r[4] - r[5]).abs() < 1e-4,
            "loss = head + late: {r:?}"
        );
    }
    let mean = |s: &[Vec<f64>], k: usize| s.iter().map(|r| r[k]).sum::<f64>() / s.len() as f64;
    for k in [4, 5] {
        assert!(
            mean(&rows[100..], k) < mean(&rows[..20], k) - 0.5,
            "column {k} falls: {} -> {}",
            mean(&rows[..20], k),
            mean(&rows[100..], k)
        );
    }
    // SIGKILL after a checkpoint, then --resume: the same log, row for row
    let killed_at = common::kill_after_checkpoint(
        pretrain(&tiny, &corpus, &b, false, &["--lr", "1e-3"]),
        &b,
        30,
    );
    assert!(killed_at < 120);
    let o = pretrain(&tiny, &corpus, &b, true, &["--lr", "1e-3"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(common::train_log_untimed(&b), common::train_log_untimed(&a));
}

/// --freeze-backbone: the head learns (its MLM loss falls) while every backbone tensor leaves
/// bit-exact as it came; a resume that would unfreeze it is refused.
#[test]
fn a_frozen_backbone_trains_the_head_alone() {
    let d = tempfile::tempdir().unwrap();
    let tiny = common::tiny_bert(d.path());
    let corpus = d.path().join("news.txt");
    std::fs::write(&corpus, brown_texts(400).join("\n")).unwrap();
    let out = d.path().join("frozen");
    // kept: the resume below is checked against the finished run's settings
    let frozen = ["--lr", "1e-2", "--freeze-backbone", "--keep-checkpoint"];
    let o = pretrain(&tiny, &corpus, &out, false, &frozen)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("backbone frozen"));
    let load = |p: std::path::PathBuf| candle_core::safetensors::load(p, &Device::Cpu).unwrap();
    let (before, after) = (
        load(tiny.join("model.safetensors")),
        load(out.join("model.safetensors")),
    );
    for (name, t) in &after {
        let b = before
            .get(name)
            .or_else(|| before.get(&format!("bert.{name}")))
            .unwrap_or_else(|| panic!("{name} not in the start"));
        assert_eq!(
            t.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
            b.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
            "{name} moved"
        );
    }
    let log = std::fs::read_to_string(out.join("train_log.csv")).unwrap();
    let rows = log_rows(&log, "step,loss,lr,eval,head_mlm,late_mlm,seconds");
    let mean = |s: &[Vec<f64>]| s.iter().map(|r| r[4]).sum::<f64>() / s.len() as f64;
    assert!(
        mean(&rows[100..]) < mean(&rows[..20]) - 0.2,
        "head MLM {} -> {}",
        mean(&rows[..20]),
        mean(&rows[100..])
    );
    let o = pretrain(&tiny, &corpus, &out, true, &["--lr", "1e-2"])
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && e.contains("backbone frozen"), "{e}");
}

#[test]
fn cocondenser_spans_are_word_aligned_windows_of_their_document() {
    let (tok, m, cls, sep) = minilm_masker();
    let mut doc = vec![cls];
    for t in brown_texts(40) {
        tok.ids_into(&t, &mut doc).unwrap();
    }
    doc.truncate(255);
    doc.push(sep);
    let body = &doc[1..doc.len() - 1];
    let mut rng = rand::rngs::StdRng::seed_from_u64(9);
    let mut differ = 0;
    for _ in 0..300 {
        let spans = condenser::train::spans::two_spans(&doc, 126, &m, &mut rng);
        for s in &spans {
            assert_eq!((s[0], s[s.len() - 1]), (cls, sep));
            let inner = &s[1..s.len() - 1];
            assert_eq!(inner.len(), 126);
            let at = body
                .windows(inner.len())
                .position(|w| w == inner)
                .expect("a span is a window of its document");
            assert!(
                at == 0 || !m.is_continuation(body[at]),
                "span starts mid-word"
            );
        }
        differ += (spans[0] != spans[1]) as usize;
    }
    assert!(
        differ > 250,
        "two independent draws: {differ} of 300 differ"
    );
    // a document shorter than a span gives the whole document twice
    let short = [cls, doc[1], doc[2], sep];
    let s = condenser::train::spans::two_spans(&short, 126, &m, &mut rng);
    assert_eq!(s[0], short.to_vec());
    assert_eq!(s[1], short.to_vec());
}

#[test]
fn cocondenser_adds_the_span_contrast_over_paired_spans() {
    let d = tempfile::tempdir().unwrap();
    let tiny = common::tiny_bert(d.path());
    let corpus = d.path().join("news.txt");
    std::fs::write(&corpus, brown_texts(800).join("\n")).unwrap();
    let out = d.path().join("co");
    let o = pretrain(
        &tiny,
        &corpus,
        &out,
        false,
        &["--cocondenser", "--lr", "1e-3"],
    )
    .output()
    .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("documents of up to 62 tokens"));
    let log = std::fs::read_to_string(out.join("train_log.csv")).unwrap();
    let rows = log_rows(
        &log,
        "step,loss,lr,eval,head_mlm,late_mlm,contrastive,seconds",
    );
    assert_eq!(rows.len(), 120);
    for r in &rows {
        assert!(
            (r[1] - r[4] - r[5] - r[6]).abs() < 1e-3,
            "total = sum of parts: {r:?}"
        );
    }
    // 8 documents = 16 spans: a random encoder is at chance, ln 15
    let first: f64 = rows[..5].iter().map(|r| r[6]).sum::<f64>() / 5.0;
    assert!((first - 15f64.ln()).abs() < 0.5, "{first}");

    // a trained encoder's [CLS] already tells the two spans of a document from the rest: far
    // below chance only if rows pair up as [a1, b1, a2, b2, ...]
    let minilm = common::model();
    let tok = ModelFolder::open(&minilm).unwrap().tokenizer().unwrap();
    let docs = Blocks::build(
        &[common::data("wikitext2/valid.parquet")],
        "text",
        &tok,
        2 * 62 + 2,
        &d.path().join("docs.u32"),
        "test",
        &indicatif::ProgressBar::hidden(),
    )
    .unwrap();
    let t = PretrainTask::new(
        &minilm,
        HeadInit::Fresh,
        docs,
        &spec(3, Some(62), 1),
        &Device::Cpu,
    )
    .unwrap();
    let idx: Vec<usize> = (0..8).map(|i| i * 37).collect();
    let parts = t.loss(&idx, 1, None).unwrap().parts;
    assert_eq!(parts[2].0, "contrastive");
    let co = parts[2].1.to_scalar::<f32>().unwrap();
    assert!(co < 1.6, "MiniLM's span contrast {co} vs chance 2.71");
}

/// A Condenser batch split across shards, each shard's loss weighted by its share of the masked
/// tokens, has exactly the whole batch's loss, parts and gradient. The batch holds the corpus's
/// short tail block, so weighting by example count instead would differ (checked).
#[test]
fn split_batches_weighted_by_masked_tokens_give_the_whole_gradient() {
    let d = tempfile::tempdir().unwrap();
    let tiny = common::tiny_bert(d.path());
    let t = task(d.path(), &tiny, 3);
    let last = t.blocks.len - 1;
    let idx = vec![0, 7, 19, 33, 41, last, 58, 60];
    let seed = 99;
    let whole = t.gradients(&idx, seed, None, 1.0).unwrap();
    let shards: [&[usize]; 3] = [&idx[..3], &idx[3..6], &idx[6..]];
    let counts: Vec<f64> = shards
        .iter()
        .map(|s| t.split_weight(s, seed).unwrap())
        .collect();
    let total: f64 = counts.iter().sum();
    assert_eq!(
        total,
        t.split_weight(&idx, seed).unwrap(),
        "masks per block"
    );
    let by_examples: Vec<f64> = shards.iter().map(|s| s.len() as f64 / 8.0).collect();
    assert!(
        counts
            .iter()
            .zip(&by_examples)
            .any(|(c, e)| (c / total - e).abs() > 0.01),
        "the test needs shards whose token and example shares differ: {counts:?}"
    );
    let parts: Vec<_> = shards
        .iter()
        .zip(&counts)
        .map(|(s, c)| t.gradients(s, seed, None, c / total).unwrap())
        .collect();
    let value: f64 = parts.iter().map(|g| g.value).sum();
    assert!(
        (value - whole.value).abs() < 1e-5 * whole.value,
        "{value} vs {}",
        whole.value
    );
    for (k, (name, v)) in whole.parts.iter().enumerate() {
        let sum: f64 = parts.iter().map(|g| g.parts[k].1).sum();
        assert!((sum - v).abs() < 1e-5 * v, "{name}: {sum} vs {v}");
    }
    let (mut compared, vars) = (0, params::vars(t.varmap()));
    for (name, var) in &vars {
        // a parameter the loss does not reach has no gradient in either
        let Some(w) = whole.grads.get(var) else {
            assert!(parts.iter().all(|g| g.grads.get(var).is_none()), "{name}");
            continue;
        };
        compared += 1;
        let summed = parts
            .iter()
            .map(|g| g.grads.get(var).unwrap().clone())
            .reduce(|a, b| (a + b).unwrap())
            .unwrap();
        let scale = w
            .abs()
            .unwrap()
            .max_all()
            .unwrap()
            .to_scalar::<f32>()
            .unwrap();
        let diff = condenser::model::max_abs_diff(w, &summed).unwrap();
        assert!(
            diff <= 1e-4 * scale.max(1e-6),
            "{name}: {diff} (scale {scale})"
        );
    }
    // every backbone, head and MLM-head tensor has a gradient here (74 for the tiny model)
    assert_eq!(compared, vars.len(), "parameters compared");
}

/// The trainer splits Condenser batches across threads: without dropout, every step's losses
/// equal the single-thread run's.
#[test]
fn pretrain_split_across_threads_trains_like_one_thread() {
    let d = tempfile::tempdir().unwrap();
    let tiny = common::tiny_bert(d.path());
    let corpus = common::data("wikitext2/valid.parquet");
    let run = |threads: &str| {
        let out = d.path().join(format!("t{threads}"));
        let mut c = pretrain(
            &tiny,
            &corpus,
            &out,
            false,
            &["--dropout", "0", "--threads", threads],
        );
        let o = c.output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let t = String::from_utf8_lossy(&o.stdout).into_owned();
        assert!(t.contains(&format!("split across {threads} thread")), "{t}");
        std::fs::read_to_string(out.join("train_log.csv")).unwrap()
    };
    let header = "step,loss,lr,eval,head_mlm,late_mlm,seconds";
    let (a, b) = (log_rows(&run("1"), header), log_rows(&run("3"), header));
    assert_eq!(a.len(), 120);
    for (s, (x, y)) in a.iter().zip(&b).enumerate() {
        // loss, head MLM, late MLM
        for k in [1, 4, 5] {
            assert!(
                (x[k] - y[k]).abs() <= 1e-5 * x[k].abs(),
                "step {}: {x:?} vs {y:?}",
                s + 1
            );
        }
    }
}

/// The engine's Condenser step (backbone, head layers fed the last [CLS] and layer skip_from's
/// tokens, both MLM losses) gives the candle graph's loss and every parameter's gradient, with
/// dropout off (the two draw dropout differently), on MiniLM with real text.
#[test]
fn engine_step_equals_the_candle_graph() {
    let d = tempfile::tempdir().unwrap();
    let t = wiki_task(d.path(), &common::model(), &spec(3, None, 2));
    engine_equals_graph(&t, 130);
}

/// Plain MLM (the control of condenser-sts) from a masked-LM BERT: no head layers, the
/// checkpoint's own MLM head (nothing fresh), the last layer's loss alone; the engine's step
/// (which runs no head) gives the candle graph's loss and gradients.
#[test]
fn plain_mlm_keeps_the_checkpoints_mlm_head_and_the_engine_equals_the_graph() {
    let d = tempfile::tempdir().unwrap();
    let init = common::bert_tiny_mlm();
    let plain = PretrainSpec {
        head_mlm: false,
        ..spec(1, None, 2)
    };
    let t = wiki_task(d.path(), &init, &plain);
    assert!(t.fresh().is_empty(), "fresh: {:?}", t.fresh());
    assert!(t.model.head.is_empty());
    // no head is no reason to leave the engine (it trained on candle's graph, "no layers")
    assert_eq!(t.backend().declines(), None);
    let note = t.mlm_head_note(HeadInit::Fresh);
    assert!(
        note.contains("the starting checkpoint's own") && note.contains("plain MLM"),
        "{note}"
    );
    let idx: Vec<usize> = (0..6).map(|i| i * 11).collect();
    let out = t.loss(&idx, 5, None).unwrap();
    let parts: Vec<&str> = out.parts.iter().map(|p| p.0).collect();
    assert_eq!(parts, ["late_mlm"]);
    // the checkpoint's MLM head predicts masked words better than chance (ln 30522 = 10.33,
    // where a fresh head starts); SPLADE-tiny's, trained for expansion, measures 8.84 here
    let late = out.total.to_scalar::<f32>().unwrap();
    assert!(late < 9.5, "late MLM loss {late}");
    engine_equals_graph(&t, 35);
    // the same start as a Condenser: only the head's layers are fresh, the MLM head is kept
    let cd = wiki_task(d.path(), &init, &spec(1, None, 2));
    assert!(cd.fresh().iter().all(|n| n.starts_with("c_head.")));
    assert!(cd
        .mlm_head_note(HeadInit::Fresh)
        .contains("both MLM losses"));
}

/// A pre-training task on WikiText-2 valid's 48-token blocks.
fn wiki_task(dir: &std::path::Path, init: &std::path::Path, spec: &PretrainSpec) -> PretrainTask {
    let tok = ModelFolder::open(init).unwrap().tokenizer().unwrap();
    let blocks = Blocks::build(
        &[common::data("wikitext2/valid.parquet")],
        "text",
        &tok,
        48,
        &dir.join("b.u32"),
        "test",
        &indicatif::ProgressBar::hidden(),
    )
    .unwrap();
    PretrainTask::new(init, HeadInit::Fresh, blocks, spec, &Device::Cpu).unwrap()
}

/// The engine's step and the candle graph's: the same loss and every parameter's gradient, with
/// dropout off (the two draw dropout differently).
fn engine_equals_graph(t: &PretrainTask, min_compared: usize) {
    let idx: Vec<usize> = (0..6).map(|i| i * 11).collect();
    let engine = t.gradients(&idx, 5, None, 1.0).unwrap();
    let vars = params::var_list(t.varmap());
    let graph =
        condenser::train::task::backward(t.loss(&idx, 5, None).unwrap(), 1.0, &vars).unwrap();
    assert!(
        (engine.value - graph.value).abs() < 1e-4 * graph.value,
        "{} vs {}",
        engine.value,
        graph.value
    );
    let mut compared = 0;
    for (name, v) in params::vars(t.varmap()) {
        let (Some(a), Some(b)) = (engine.grads.get(&v), graph.grads.get(&v)) else {
            assert!(
                graph.grads.get(&v).is_none(),
                "engine: no gradient for {name}"
            );
            continue;
        };
        let (a, b): (Vec<f32>, Vec<f32>) = (
            a.flatten_all().unwrap().to_vec1().unwrap(),
            b.flatten_all().unwrap().to_vec1().unwrap(),
        );
        let scale = b.iter().fold(0f32, |m, x| m.max(x.abs())).max(1e-2);
        let diff = a
            .iter()
            .zip(&b)
            .fold(0f32, |m, (x, y)| m.max((x - y).abs()))
            / scale;
        assert!(diff < 5e-4, "{name}: relative difference {diff}");
        compared += 1;
    }
    assert!(compared > min_compared, "{compared} parameters compared");
}

/// A column list reads each file's listed columns; a listed name that no corpus file has (a
/// typo beside a name that matches) is refused, never skipped.
#[test]
fn a_column_no_corpus_file_has_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let tok = ModelFolder::open(&common::bert_tiny_mlm())
        .unwrap()
        .tokenizer()
        .unwrap();
    let files = [
        common::data("wikitext2/valid.parquet"),
        common::data("stsb/dev.parquet"),
    ];
    let build = |column: &str, name: &str| {
        Blocks::build(
            &files,
            column,
            &tok,
            64,
            &d.path().join(name),
            "test",
            &indicatif::ProgressBar::hidden(),
        )
    };
    let both = build("text,sentence1,sentence2", "a.u32").unwrap();
    let wiki_only = build("text,sentence1", "b.u32").unwrap();
    assert!(
        both.len > wiki_only.len,
        "{} vs {}",
        both.len,
        wiki_only.len
    );
    let e = match build("text,sentence1,sentense2", "c.u32") {
        Ok(_) => panic!("a misspelt column was skipped"),
        Err(e) => e.to_string(),
    };
    assert!(e.contains("sentense2") && e.contains("--column"), "{e}");
    assert!(!d.path().join("c.u32").exists() && !d.path().join("c.tmp").exists());
}
