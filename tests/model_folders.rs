//! Model folders: what loads, and clear errors naming the file for what does not.
mod common;
use candle_core::Device;
use condenser::model::{ModelFolder, Pooling, SentenceEncoder};
use std::path::Path;

fn copy_model(to: &Path) {
    let from = common::model();
    for e in std::fs::read_dir(&from).unwrap() {
        let p = e.unwrap().path();
        if p.is_file() {
            std::fs::copy(&p, to.join(p.file_name().unwrap())).unwrap();
        }
    }
    std::fs::create_dir_all(to.join("1_Pooling")).unwrap();
    std::fs::copy(
        from.join("1_Pooling/config.json"),
        to.join("1_Pooling/config.json"),
    )
    .unwrap();
}

fn load_err(dir: &Path) -> String {
    match SentenceEncoder::load(dir, &Device::Cpu) {
        Ok(_) => panic!("{} should not load", dir.display()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn reads_sentence_transformers_folder() {
    let f = ModelFolder::open(&common::model()).unwrap();
    assert_eq!(f.pooling, Pooling::MEAN);
    assert!(f.normalize);
    assert_eq!(f.max_seq_length, 256);
    assert_eq!((f.config.hidden_size, f.config.num_hidden_layers), (384, 6));
}

#[test]
fn missing_config_or_weights() {
    let d = tempfile::tempdir().unwrap();
    copy_model(d.path());
    std::fs::remove_file(d.path().join("config.json")).unwrap();
    let e = load_err(d.path());
    assert!(
        e.contains("config.json") && e.contains("missing config.json"),
        "{e}"
    );
    let d = tempfile::tempdir().unwrap();
    copy_model(d.path());
    std::fs::remove_file(d.path().join("model.safetensors")).unwrap();
    let e = load_err(d.path());
    assert!(
        e.contains(&d.path().display().to_string()) && e.contains("missing weights"),
        "{e}"
    );
    let e = load_err(Path::new("/nonexistent/model"));
    assert!(
        e.contains("/nonexistent/model") && e.contains("no such model folder"),
        "{e}"
    );
}

#[test]
fn hidden_size_that_does_not_match_weights() {
    let d = tempfile::tempdir().unwrap();
    copy_model(d.path());
    let cfg = std::fs::read_to_string(d.path().join("config.json"))
        .unwrap()
        .replace("\"hidden_size\": 384", "\"hidden_size\": 768");
    std::fs::write(d.path().join("config.json"), cfg).unwrap();
    let e = load_err(d.path());
    assert!(
        e.contains("model.safetensors") && e.contains("do not match config.json"),
        "{e}"
    );
    let cfg = std::fs::read_to_string(d.path().join("config.json"))
        .unwrap()
        .replace("\"hidden_size\": 768", "\"hidden_size\": 380");
    std::fs::write(d.path().join("config.json"), cfg).unwrap();
    let e = load_err(d.path());
    assert!(
        e.contains("config.json") && e.contains("not a multiple of num_attention_heads"),
        "{e}"
    );
}

/// A plain HF folder (no sentence-transformers files) with "bert."-prefixed weights loads, with
/// mean pooling and no normalisation, and gives the same token states.
#[test]
fn plain_hf_folder_with_bert_prefix() {
    let d = tempfile::tempdir().unwrap();
    let from = common::model();
    for f in ["config.json", "tokenizer.json"] {
        std::fs::copy(from.join(f), d.path().join(f)).unwrap();
    }
    let data = std::fs::read(from.join("model.safetensors")).unwrap();
    let st = safetensors::SafeTensors::deserialize(&data).unwrap();
    let renamed: Vec<(String, safetensors::tensor::TensorView)> = st
        .tensors()
        .into_iter()
        .map(|(n, t)| (format!("bert.{n}"), t))
        .collect();
    safetensors::serialize_to_file(renamed, None, &d.path().join("model.safetensors")).unwrap();
    let plain = SentenceEncoder::load(d.path(), &Device::Cpu).unwrap();
    assert!(!plain.normalize);
    assert_eq!(plain.max_seq_length, 512);
    let st_enc = SentenceEncoder::load(&from, &Device::Cpu).unwrap();
    let pb = indicatif::ProgressBar::hidden();
    let s = [
        "A man is playing a guitar.",
        "Two dogs run through a field of tall grass.",
    ];
    let (a, b) = (
        plain.encode(&s, 2, &pb).unwrap(),
        st_enc.encode(&s, 2, &pb).unwrap(),
    );
    for i in 0..2 {
        let n: f32 = a.row(i).iter().map(|x| x * x).sum::<f32>().sqrt();
        for (x, y) in a.row(i).iter().zip(b.row(i)) {
            assert!((x / n - y).abs() < 1e-5);
        }
    }
}

/// WiSE-FT: `interpolate` mixes two folders' weights tensor by tensor, (1 - alpha) start + alpha
/// end, keeps the end's model files (not its run's checkpoint and logs), and refuses an alpha outside [0, 1] or models whose tensors differ.
#[test]
fn interpolate_mixes_weights_and_refuses_other_architectures() {
    use candle_core::Tensor;
    let d = tempfile::tempdir().unwrap();
    let start = common::tiny_bert(d.path());
    let end = d.path().join("end");
    std::fs::create_dir(&end).unwrap();
    for f in ["config.json", "tokenizer.json"] {
        std::fs::copy(start.join(f), end.join(f)).unwrap();
    }
    // the end's training run: its checkpoint (optimizer moments), log and curve stay behind
    std::fs::create_dir(end.join("checkpoint")).unwrap();
    for f in [
        "checkpoint/state.json",
        "train_log.csv",
        "loss.svg",
        "blocks-32-x.u32",
        "README.md",
    ] {
        std::fs::write(end.join(f), b"run").unwrap();
    }
    let w = candle_core::safetensors::load(start.join("model.safetensors"), &Device::Cpu).unwrap();
    let write = |dir: &Path, t: &std::collections::HashMap<String, Tensor>| {
        candle_core::safetensors::save(t, dir.join("model.safetensors")).unwrap()
    };
    let tripled: std::collections::HashMap<String, Tensor> = (w.iter())
        .map(|(k, v)| (k.clone(), (v * 3.0).unwrap()))
        .collect();
    write(&end, &tripled);
    // HF's integer position ids in the start only: a buffer, left out, not an architecture change
    let mut with_ids = w.clone();
    let ids = Tensor::arange(0i64, 128, &Device::Cpu)
        .unwrap()
        .unsqueeze(0)
        .unwrap();
    with_ids.insert("embeddings.position_ids".into(), ids);
    write(&start, &with_ids);
    let run = |end: &Path, alpha: &str, out: &str| {
        let out = d.path().join(out);
        let o = common::condenser(&[
            "interpolate",
            "--start",
            start.to_str().unwrap(),
            "--end",
            end.to_str().unwrap(),
            "--alpha",
            alpha,
            "--out",
            out.to_str().unwrap(),
        ]);
        (o, out)
    };
    let (o, mixed) = run(&end, "0.25", "mixed");
    common::ok(o);
    assert!(mixed.join("tokenizer.json").is_file());
    for f in ["checkpoint", "train_log.csv", "loss.svg", "blocks-32-x.u32"] {
        assert!(!mixed.join(f).exists(), "{f} of the end's run copied");
    }
    // its own card, not the end's: what was mixed, and the command
    let card = std::fs::read_to_string(mixed.join("README.md")).unwrap();
    assert!(card.contains("0.75 x") && card.contains("0.25 x"), "{card}");
    assert!(card.contains("condenser interpolate --start"), "{card}");
    let m = candle_core::safetensors::load(mixed.join("model.safetensors"), &Device::Cpu).unwrap();
    assert_eq!(m.len(), w.len());
    for (k, v) in &w {
        let want = (v * 1.5)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1::<f32>()
            .unwrap();
        let got = m[k].flatten_all().unwrap().to_vec1::<f32>().unwrap();
        let worst = want
            .iter()
            .zip(&got)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        assert!(worst < 1e-6, "{k}: {worst}");
    }
    let e = common::err(run(&end, "1.5", "bad").0);
    assert!(e.contains("--alpha 1.5"), "{e}");
    let mut fewer = tripled.clone();
    fewer.remove("embeddings.token_type_embeddings.weight");
    write(&end, &fewer);
    let e = common::err(run(&end, "0.5", "bad").0);
    assert!(e.contains("embeddings.token_type_embeddings.weight"), "{e}");
}

/// A BertForMaskedLM folder whose LayerNorms are named gamma/beta (SPLADE-tiny) trains: every
/// backbone tensor is read from it (a LayerNorm is not left at its fresh init of ones and zeros),
/// and pre-training keeps its MLM head (`cls.predictions`), only the Condenser head starting fresh.
#[test]
fn an_mlm_bert_with_gamma_beta_norms_trains_from_its_own_weights() {
    let d = tempfile::tempdir().unwrap();
    let mlm = common::bert_tiny_mlm();
    let out = d.path().join("bi");
    let stsb = common::data("stsb/dev.parquet");
    let said = common::ok(common::condenser(&[
        "train-biencoder",
        "--init",
        mlm.to_str().unwrap(),
        "--train",
        stsb.to_str().unwrap(),
        "--loss",
        "cosine",
        "--max-steps",
        "1",
        "--batch-size",
        "4",
        "--lr",
        "1e-12",
        "--out",
        out.to_str().unwrap(),
    ]));
    assert!(!said.contains("initialised fresh"), "{said}");
    let start =
        candle_core::safetensors::load(mlm.join("model.safetensors"), &Device::Cpu).unwrap();
    let saved =
        candle_core::safetensors::load(out.join("model.safetensors"), &Device::Cpu).unwrap();
    let gamma = start["bert.encoder.layer.1.output.LayerNorm.gamma"]
        .to_vec1::<f32>()
        .unwrap();
    let weight = saved["encoder.layer.1.output.LayerNorm.weight"]
        .to_vec1::<f32>()
        .unwrap();
    let worst = gamma
        .iter()
        .zip(&weight)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    assert!(
        worst < 1e-6,
        "the LayerNorm did not start from gamma: {worst}"
    );
    assert!(
        gamma.iter().any(|g| (g - 1.0).abs() > 1e-3),
        "gamma is not the fresh init"
    );
    let wiki = common::data("wikitext2/test.parquet");
    let said = common::ok(common::condenser(&[
        "pretrain",
        "--model",
        mlm.to_str().unwrap(),
        "--corpus",
        wiki.to_str().unwrap(),
        "--max-seq-length",
        "32",
        "--max-steps",
        "1",
        "--batch-size",
        "4",
        "--out",
        d.path().join("cd").to_str().unwrap(),
    ]));
    let fresh = said
        .lines()
        .find(|l| l.starts_with("initialised fresh"))
        .unwrap_or_default();
    assert!(
        fresh.contains("c_head.") && !fresh.contains("cls.predictions"),
        "{said}"
    );
}

/// A masked-LM BERT folder (no Pooling module) is pooled by `[CLS]`, as Condenser's paper
/// fine-tunes it, and says so; a plain BertModel folder by the mean, saying so; a
/// sentence-transformers folder by its own Pooling module, without a line.
#[test]
fn a_masked_lm_folder_pools_by_cls_and_says_which() {
    use condenser::model::folders::folder::PoolingFrom;
    let mlm = common::bert_tiny_mlm();
    let f = ModelFolder::open(&mlm).unwrap();
    assert_eq!(
        (f.pooling, f.pooling_from),
        (Pooling::CLS, PoolingFrom::MlmDefault)
    );
    let note = f.pooling_note().unwrap();
    assert!(
        note.contains("pooling cls") && note.contains("--pooling"),
        "{note}"
    );
    // the default's embeddings are the [CLS] state's, not the mean's
    let texts =
        condenser::data::read_texts(&common::data("stsb/dev.parquet"), "sentence1", Some(16))
            .unwrap();
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    let bar = indicatif::ProgressBar::hidden();
    let embed = |p: Option<Pooling>| {
        let mut enc = SentenceEncoder::load(&mlm, &Device::Cpu).unwrap();
        if let Some(p) = p {
            enc.pooling = p;
        }
        enc.encode(&texts, 8, &bar).unwrap().data
    };
    let (default, cls, mean) = (
        embed(None),
        embed(Some(Pooling::CLS)),
        embed(Some(Pooling::MEAN)),
    );
    assert_eq!(default, cls);
    let far = default
        .iter()
        .zip(&mean)
        .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
    assert!(far > 1e-2, "[CLS] and mean pooling agree to {far}");
    // a BertModel folder (a pretrain output's shape) keeps the mean, with its line
    let d = tempfile::tempdir().unwrap();
    let plain = ModelFolder::open(&common::tiny_bert(d.path())).unwrap();
    assert_eq!(
        (plain.pooling, plain.pooling_from),
        (Pooling::MEAN, PoolingFrom::PlainDefault)
    );
    assert!(plain.pooling_note().unwrap().contains("pooling mean"));
    let st = ModelFolder::open(&common::model()).unwrap();
    assert_eq!(st.pooling_from, PoolingFrom::Module);
    assert!(st.pooling_note().is_none());
}

/// A folder whose config_sentence_transformers.json names a default prompt is encoded as
/// sentence-transformers' `encode` does: the prompt before every text (the embedding of the text
/// with the prompt written in, bit for bit), and `encode` names it; `--prompt-name` and
/// `--prompt` pick another (an unknown name is refused naming the folder's); MiniLM's own config
/// (no prompts) gives no such line.
#[test]
fn a_default_prompt_is_applied() {
    let d = tempfile::tempdir().unwrap();
    let model = d.path().join("model");
    std::fs::create_dir_all(&model).unwrap();
    copy_model(&model);
    assert!(ModelFolder::open(&model).unwrap().prompts.named.is_empty());
    let cfg =
        r#"{"prompts": {"query": "query: ", "document": ""}, "default_prompt_name": "query"}"#;
    std::fs::write(model.join("config_sentence_transformers.json"), cfg).unwrap();
    let f = ModelFolder::open(&model).unwrap();
    assert_eq!(f.prompts.default_prompt(), Some(("query", "query: ")));
    let encode = |model: &Path, text: &str, extra: &[&str]| {
        let input = d.path().join("in.jsonl");
        std::fs::write(&input, serde_json::json!({ "text": text }).to_string()).unwrap();
        let out = d.path().join("out.parquet");
        let args = ["encode", "--model", model.to_str().unwrap(), "--input"];
        let said = common::ok(common::condenser(
            &[
                &args[..],
                &[input.to_str().unwrap(), "--out", out.to_str().unwrap()],
                extra,
            ]
            .concat(),
        ));
        let b = condenser::data::open(&out, &["embedding"])
            .unwrap()
            .next()
            .unwrap()
            .unwrap();
        (said, b.vectors("embedding").unwrap())
    };
    let (said, prompted) = encode(&model, "a cat sits", &[]);
    assert!(
        said.contains("default prompt 'query' (\"query: \") is put before every text"),
        "{said}"
    );
    let plain = common::model();
    assert_eq!(prompted, encode(&plain, "query: a cat sits", &[]).1);
    assert_eq!(
        encode(&model, "a cat sits", &["--prompt-name", "document"]).1,
        encode(&plain, "a cat sits", &[]).1
    );
    assert_eq!(
        encode(&model, "a cat sits", &["--prompt", "passage: "]).1,
        encode(&plain, "passage: a cat sits", &[]).1
    );
    let bad = common::err(common::condenser(&[
        "encode",
        "--model",
        model.to_str().unwrap(),
        "--input",
        d.path().join("in.jsonl").to_str().unwrap(),
        "--out",
        d.path().join("bad.parquet").to_str().unwrap(),
        "--prompt-name",
        "qeury",
    ]));
    assert!(
        bad.contains("prompt name 'qeury' is not one of the model's prompts ('document', 'query')"),
        "{bad}"
    );
    assert!(!encode(&plain, "a cat sits", &[])
        .0
        .contains("default prompt"));
}
