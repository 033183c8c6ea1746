//! Paths to the real model and data that `datasets/fetch.sh` sets up. Tests that need them fail
//! with a clear message when they are missing: a skipped parity test would prove nothing.
#![allow(dead_code)]
use std::path::PathBuf;

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn require(p: PathBuf) -> PathBuf {
    assert!(
        p.exists(),
        "{} is missing: run `bash datasets/fetch.sh` first",
        p.display()
    );
    p
}

pub fn model() -> PathBuf {
    require(root().join("datasets/model/all-MiniLM-L6-v2"))
}

/// SPLADE-tiny: a plain BertForMaskedLM (gamma/beta LayerNorms, tied decoder, no pooler).
pub fn bert_tiny_mlm() -> PathBuf {
    require(root().join("datasets/model/bert-tiny-mlm"))
}

pub fn data(rel: &str) -> PathBuf {
    require(root().join("datasets/data").join(rel))
}

pub fn brown(genre: &str) -> PathBuf {
    require(
        root()
            .join("datasets/brown")
            .join(format!("{genre}.parquet")),
    )
}

pub fn fixture() -> serde_json::Value {
    let p = require(root().join("datasets/data/fixtures/reference-minilm.json"));
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// The fixture's 64 sentences and sentence-transformers' f32 embeddings of them.
pub fn fixture_embeddings() -> (Vec<String>, Vec<Vec<f64>>) {
    let fx = fixture();
    let strings = |v: &serde_json::Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_string())
            .collect()
    };
    let vectors = fx["embeddings"]["vectors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            v.as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap())
                .collect()
        })
        .collect();
    (strings(&fx["embeddings"]["sentences"]), vectors)
}

/// Worst cosine and largest absolute difference of each `got` row to its `want` row.
pub fn worst_cosine_and_max_diff(got: &[Vec<f32>], want: &[Vec<f64>]) -> (f64, f64) {
    let (mut worst, mut max_diff) = (1f64, 0f64);
    let n = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
    for (g, w) in got.iter().zip(want) {
        let g: Vec<f64> = g.iter().map(|&x| x as f64).collect();
        let dot: f64 = g.iter().zip(w).map(|(a, b)| a * b).sum();
        worst = worst.min(dot / (n(&g) * n(w)));
        for (a, b) in g.iter().zip(w) {
            max_diff = max_diff.max((a - b).abs());
        }
    }
    (worst, max_diff)
}

/// The four domains of the article, as the fixture names them.
pub fn four_domains() -> Vec<(&'static str, PathBuf)> {
    vec![
        ("stsb", data("stsb/train.parquet")),
        ("mrpc", data("mrpc/train.parquet")),
        ("rte", data("rte/train.parquet")),
        ("medqp", data("medqp/all.parquet")),
    ]
}

/// A tiny random BERT (hidden 8, 2 layers) with MiniLM's tokenizer, as an HF folder `parent/tiny`:
/// training tests run in seconds on it.
pub fn tiny_bert(parent: &std::path::Path) -> PathBuf {
    use candle_core::{Device, Tensor};
    let dir = parent.join("tiny");
    std::fs::create_dir(&dir).unwrap();
    let cfg = serde_json::json!({
        "architectures": ["BertModel"], "model_type": "bert", "vocab_size": 30522, "hidden_size": 8,
        "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 16,
        "max_position_embeddings": 128, "type_vocab_size": 2, "layer_norm_eps": 1e-12, "hidden_act": "gelu"
    });
    std::fs::write(
        dir.join("config.json"),
        serde_json::to_string_pretty(&cfg).unwrap(),
    )
    .unwrap();
    std::fs::copy(model().join("tokenizer.json"), dir.join("tokenizer.json")).unwrap();
    let dev = Device::Cpu;
    // seeded, so every test run trains the same tiny model: uniform with BERT's std 0.02
    let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(17);
    let init = |rng: &mut rand::rngs::StdRng, shape: (usize, usize)| -> Tensor {
        use rand::Rng;
        let a = 0.02 * 3f32.sqrt();
        let v: Vec<f32> = (0..shape.0 * shape.1)
            .map(|_| rng.random_range(-a..a))
            .collect();
        Tensor::from_vec(v, shape, &dev).unwrap()
    };
    let mut t: Vec<(String, Tensor)> = vec![
        (
            "embeddings.word_embeddings.weight".into(),
            init(&mut rng, (30522, 8)),
        ),
        (
            "embeddings.position_embeddings.weight".into(),
            init(&mut rng, (128, 8)),
        ),
        (
            "embeddings.token_type_embeddings.weight".into(),
            init(&mut rng, (2, 8)),
        ),
        (
            "embeddings.LayerNorm.weight".into(),
            Tensor::ones(8, candle_core::DType::F32, &dev).unwrap(),
        ),
        (
            "embeddings.LayerNorm.bias".into(),
            Tensor::zeros(8, candle_core::DType::F32, &dev).unwrap(),
        ),
    ];
    for l in 0..2 {
        for (n, o, i) in [
            ("attention.self.query", 8, 8),
            ("attention.self.key", 8, 8),
            ("attention.self.value", 8, 8),
            ("attention.output.dense", 8, 8),
            ("intermediate.dense", 16, 8),
            ("output.dense", 8, 16),
        ] {
            t.push((
                format!("encoder.layer.{l}.{n}.weight"),
                init(&mut rng, (o, i)),
            ));
            t.push((
                format!("encoder.layer.{l}.{n}.bias"),
                Tensor::zeros(o, candle_core::DType::F32, &dev).unwrap(),
            ));
        }
        for n in ["attention.output.LayerNorm", "output.LayerNorm"] {
            t.push((
                format!("encoder.layer.{l}.{n}.weight"),
                Tensor::ones(8, candle_core::DType::F32, &dev).unwrap(),
            ));
            t.push((
                format!("encoder.layer.{l}.{n}.bias"),
                Tensor::zeros(8, candle_core::DType::F32, &dev).unwrap(),
            ));
        }
    }
    safetensors::serialize_to_file(
        t.iter().map(|(n, x)| (n.as_str(), x)),
        None,
        &dir.join("model.safetensors"),
    )
    .unwrap();
    dir
}

/// all-MiniLM-L6-v2 cut to its first `layers` layers (config.json says so; the checkpoint's
/// later layers are not read): a real pre-trained encoder that trains and scores several times
/// faster, for tests that need a model that learns.
pub fn minilm_layers(parent: &std::path::Path, layers: usize) -> PathBuf {
    let dir = parent.join(format!("minilm-{layers}"));
    std::fs::create_dir_all(&dir).unwrap();
    for sub in ["", "1_Pooling"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
        for f in std::fs::read_dir(model().join(sub)).unwrap() {
            let f = f.unwrap().path();
            if f.is_file() {
                std::fs::copy(&f, dir.join(sub).join(f.file_name().unwrap())).unwrap();
            }
        }
    }
    let cfg = dir.join("config.json");
    let mut c: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&cfg).unwrap()).unwrap();
    c["num_hidden_layers"] = layers.into();
    std::fs::write(&cfg, serde_json::to_string_pretty(&c).unwrap()).unwrap();
    dir
}

/// The optimizer step of the checkpoint in `out` (0 while there is none).
pub fn checkpoint_step(out: &std::path::Path) -> u64 {
    std::fs::read_to_string(out.join("checkpoint/state.json"))
        .ok()
        .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok())
        .and_then(|v| v["state"]["step"].as_u64())
        .unwrap_or(0)
}

/// Start `cmd` (a training run writing `out/checkpoint`), SIGKILL it once its checkpoint has
/// reached `step`, and return the step of the checkpoint it left.
pub fn kill_after_checkpoint(cmd: std::process::Command, out: &std::path::Path, step: u64) -> u64 {
    kill_when(cmd, || checkpoint_step(out) >= step);
    checkpoint_step(out)
}

/// Start `cmd` and SIGKILL it once `ready()` holds; fails if the run finishes first or nothing
/// is ready within 120 s.
pub fn kill_when(mut cmd: std::process::Command, ready: impl Fn() -> bool) {
    use std::process::Stdio;
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while !ready() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run finished before it could be killed"
        );
        assert!(t0.elapsed().as_secs() < 120, "no checkpoint appeared");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
}

/// The stdout and stderr of a run that must succeed (its stderr shown when it did not).
pub fn ok(out: std::process::Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    String::from_utf8_lossy(&out.stdout).into_owned() + &err
}

/// The stderr of a run that must fail.
pub fn err(out: std::process::Output) -> String {
    assert!(!out.status.success(), "expected a failure");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `condenser` with `args`, its output collected.
pub fn condenser(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_condenser"))
        .args(args)
        .output()
        .unwrap()
}

/// A cross-encoder trained 3 steps from the tiny BERT on STSb dev, in `dir/ce`.
pub fn cross_encoder(dir: &std::path::Path) -> PathBuf {
    let tiny = tiny_bert(dir);
    let ce = dir.join("ce");
    let o = condenser(&[
        "train-cross-encoder",
        "--model",
        tiny.to_str().unwrap(),
        "--out",
        ce.to_str().unwrap(),
        "--max-steps",
        "3",
        "--train",
        data("stsb/dev.parquet").to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    ce
}

/// Cranfield rewritten in BEIR's layout, as BEIR's GenericDataLoader reads it: corpus.jsonl with
/// `_id`, `title`, `text` (and a metadata object BEIR files carry), queries.jsonl, and
/// qrels/test.tsv with its `query-id corpus-id score` header.
pub fn beir_cranfield(dir: &std::path::Path) -> PathBuf {
    use std::io::Write;
    let out = dir.join("cranfield-beir");
    std::fs::create_dir_all(out.join("qrels")).unwrap();
    let src = data("cranfield");
    let mut corpus = std::fs::File::create(out.join("corpus.jsonl")).unwrap();
    for b in condenser::data::open(&src.join("corpus.parquet"), &["id", "title", "text"]).unwrap() {
        let b = b.unwrap();
        let (ids, titles, texts) = (
            b.ids("id").unwrap(),
            b.texts("title").unwrap(),
            b.texts("text").unwrap(),
        );
        for ((id, title), text) in ids.iter().zip(titles).zip(texts) {
            let line = serde_json::json!({"_id": id, "title": title, "text": text, "metadata": {}});
            writeln!(corpus, "{line}").unwrap();
        }
    }
    let mut queries = std::fs::File::create(out.join("queries.jsonl")).unwrap();
    for (id, text) in condenser::data::retrieval::read_texts(&src.join("queries.parquet")).unwrap()
    {
        writeln!(
            queries,
            "{}",
            serde_json::json!({"_id": id, "text": text, "metadata": {}})
        )
        .unwrap();
    }
    let mut qrels = std::fs::File::create(out.join("qrels/test.tsv")).unwrap();
    writeln!(qrels, "query-id\tcorpus-id\tscore").unwrap();
    for b in
        condenser::data::open(&src.join("qrels.parquet"), &["query_id", "doc_id", "score"]).unwrap()
    {
        let b = b.unwrap();
        let (q, d, s) = (
            b.ids("query_id").unwrap(),
            b.ids("doc_id").unwrap(),
            b.labels("score").unwrap(),
        );
        for ((q, d), s) in q.iter().zip(d).zip(s) {
            writeln!(qrels, "{q}\t{d}\t{s}").unwrap();
        }
    }
    out
}

/// The binary run with extra environment variables (a CPU class, a matmul library, a bf16 route).
pub fn condenser_env(env: &[(&str, &str)], args: &[&str]) -> std::process::Output {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_condenser"));
    c.args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

/// A training run's train_log.csv without its last column (each step's wall time, which no two
/// runs share): what two runs of the same settings must agree on, row for row.
pub fn train_log_untimed(out: &std::path::Path) -> String {
    let log = std::fs::read_to_string(out.join("train_log.csv")).unwrap();
    let mut lines = log.lines();
    let header = lines.next().unwrap();
    assert!(
        header.ends_with(",seconds"),
        "train_log.csv's header: {header}"
    );
    let mut kept = String::new();
    for l in std::iter::once(header).chain(lines) {
        let (row, seconds) = l.rsplit_once(',').unwrap();
        assert!(
            l == header || seconds.parse::<f64>().is_ok_and(|t| t > 0.0),
            "{l}"
        );
        kept.push_str(row);
        kept.push('\n');
    }
    kept
}

/// The per-step losses (second column) of a training run's train_log.csv.
pub fn train_log_losses(out: &std::path::Path) -> Vec<f64> {
    std::fs::read_to_string(out.join("train_log.csv"))
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(1).unwrap().parse().unwrap())
        .collect()
}

/// The fixture's sentences as `dir/fixture.jsonl` (one `text` a line), with the f32 embeddings
/// sentence-transformers gives them.
pub fn fixture_jsonl(dir: &std::path::Path) -> (PathBuf, Vec<Vec<f64>>) {
    let (sentences, want) = fixture_embeddings();
    let input = dir.join("fixture.jsonl");
    let lines: Vec<String> = sentences
        .iter()
        .map(|s| serde_json::json!({ "text": s }).to_string())
        .collect();
    std::fs::write(&input, lines.join("\n")).unwrap();
    (input, want)
}

/// Encode the fixture's sentences under `env`; the summary and the worst cosine / max difference
/// against sentence-transformers' f32 embeddings.
pub fn fixture_run(env: &[(&str, &str)], extra: &[&str]) -> (String, f64, f64) {
    let d = tempfile::tempdir().unwrap();
    let (input, want) = fixture_jsonl(d.path());
    let out = d.path().join("e.parquet");
    let model = model();
    let mut args = vec![
        "encode",
        "--model",
        model.to_str().unwrap(),
        "--input",
        input.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend(extra);
    let o = condenser_env(env, &args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let b = condenser::data::open(&out, &["embedding"])
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    let (worst, max_diff) = worst_cosine_and_max_diff(&b.vectors("embedding").unwrap(), &want);
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        worst,
        max_diff,
    )
}
