//! Retrieval folders (BEIR layout and ours), hard-negative mining and the retrieval losses.
mod common;
use common::{beir_cranfield, condenser, data, err, ok, tiny_bert};
use condenser::data::retrieval::{read_texts, RetrievalSet};
use std::io::Write;
use std::path::{Path, PathBuf};

fn results(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap()
}

#[test]
fn beir_folder_gives_the_parquet_folders_metrics() {
    let d = tempfile::tempdir().unwrap();
    let beir = beir_cranfield(d.path());
    let (a, b) = (
        RetrievalSet::load(&data("cranfield")).unwrap(),
        RetrievalSet::load(&beir).unwrap(),
    );
    assert_eq!(
        (a.queries.len(), a.corpus.len()),
        (b.queries.len(), b.corpus.len())
    );
    assert_eq!(a.corpus, b.corpus, "title + text joined the same way");
    assert_eq!(a.relevant, b.relevant);
    let tiny = tiny_bert(d.path());
    let out = d.path().join("eval");
    let o = condenser(&[
        "evaluate",
        "--model",
        tiny.to_str().unwrap(),
        "--retrieval",
        &format!("parquet={}", data("cranfield").display()),
        "--retrieval",
        &format!("beir={}", beir.display()),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = results(&out);
    let (m1, m2) = (&r["results"][0]["metrics"], &r["results"][1]["metrics"]);
    assert!(m1["cosine_ndcg@10"].as_f64().unwrap() > 0.0);
    assert_eq!(m1, m2, "same metrics from both layouts");
    // per_query.csv: each judged query's nDCG@10 on each set, their mean the set's
    let per = std::fs::read_to_string(out.join("per_query.csv")).unwrap();
    let mut lines = per.lines();
    assert_eq!(lines.next(), Some("model,dataset,query,metric,value"));
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let on_parquet: Vec<f64> = (rows.iter())
        .filter(|r| r[1] == "parquet" && r[3] == "cosine_ndcg@10")
        .map(|r| r[4].parse().unwrap())
        .collect();
    assert_eq!(
        (on_parquet.len(), rows.len()),
        (225, 450),
        "Cranfield's 225 judged queries"
    );
    let mean = on_parquet.iter().sum::<f64>() / 225.0;
    assert!((mean - m1["cosine_ndcg@10"].as_f64().unwrap()).abs() < 1e-12);

    // a split that is not there names the file looked for
    let o = condenser(&[
        "evaluate",
        "--model",
        tiny.to_str().unwrap(),
        "--split",
        "dev",
        "--retrieval",
        &format!("beir={}", beir.display()),
        "--out",
        out.to_str().unwrap(),
    ]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && e.contains("qrels/dev.parquet") && e.contains("no such file"),
        "{e}"
    );
}

#[test]
fn ignore_identical_ids_removes_the_query_itself_from_the_hits() {
    // queries that are corpus documents, as in BEIR's ArguAna/Quora: without the option every
    // query finds itself first
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("self");
    std::fs::create_dir_all(dir.join("qrels")).unwrap();
    let docs = read_texts(&data("cranfield/corpus.parquet")).unwrap();
    let mut corpus = std::fs::File::create(dir.join("corpus.jsonl")).unwrap();
    let mut queries = std::fs::File::create(dir.join("queries.jsonl")).unwrap();
    let mut qrels = std::fs::File::create(dir.join("qrels/test.tsv")).unwrap();
    writeln!(qrels, "query-id\tcorpus-id\tscore").unwrap();
    for (i, (id, text)) in docs.iter().take(60).enumerate() {
        writeln!(corpus, "{}", serde_json::json!({"_id": id, "text": text})).unwrap();
        if i % 2 == 0 {
            writeln!(queries, "{}", serde_json::json!({"_id": id, "text": text})).unwrap();
            writeln!(qrels, "{id}\t{}\t1", docs[i + 1].0).unwrap();
        }
    }
    drop((corpus, queries, qrels));
    let tiny = tiny_bert(d.path());
    let run = |flag: Option<&str>| {
        let out = d.path().join(format!("eval{}", flag.is_some()));
        let mut args = vec![
            "evaluate",
            "--model",
            tiny.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ];
        let set = format!("self={}", dir.display());
        args.extend(["--retrieval", &set]);
        args.extend(flag);
        let o = condenser(&args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        results(&out)["results"][0]["metrics"].clone()
    };
    let (with, without) = (run(None), run(Some("--ignore-identical-ids")));
    // the query itself is not relevant, but it takes rank 1 from the relevant document
    assert_eq!(with["cosine_accuracy@1"].as_f64(), Some(0.0));
    assert!(without["cosine_mrr@10"].as_f64().unwrap() > with["cosine_mrr@10"].as_f64().unwrap());
}

/// A bi-encoder task from MiniLM on STSb's first `n` train pairs (sentence1 as anchor, sentence2 as
/// positive), for `loss`.
fn minilm_task(
    loss: &str,
    n: usize,
    mini: Option<usize>,
) -> condenser::train::biencoder::BiEncoderTask {
    use condenser::train::biencoder::{BiData, BiEncoderOptions, BiEncoderTask};
    let spec = condenser::train::losses::find(loss).unwrap();
    let opts = BiEncoderOptions {
        saved_max_seq_length: None,
        pooling: None,
        max_seq_length: 128,
        num_labels: 3,
        seed: 1,
        device: candle_core::Device::Cpu,
        mini_batch_size: mini,
    };
    let mut task = BiEncoderTask::new(&common::model(), spec, &opts).unwrap();
    let cols = condenser::data::PairColumns::default();
    let mut pairs = condenser::data::Pairs::read(&data("stsb/train.parquet"), &cols).unwrap();
    pairs.sentence1.truncate(n);
    pairs.sentence2.truncate(n);
    pairs.labels.truncate(n);
    task.data = BiData::from_pairs(&pairs, &task.enc).unwrap();
    task
}

#[test]
fn cached_mnr_gives_plain_mnrs_gradients() {
    use condenser::train::params::vars;
    use condenser::train::TrainTask;
    let idx: Vec<usize> = (0..24).collect();
    let plain = minilm_task("mnr", 24, None);
    let cached = minilm_task("cached-mnr", 24, Some(5)); // 5 chunks, the last one short
    let (gp, gc) = (
        plain.gradients(&idx, 7, None, 1.0).unwrap(),
        cached.gradients(&idx, 7, None, 1.0).unwrap(),
    );
    assert!(
        (gp.value - gc.value).abs() < 1e-6,
        "{} vs {}",
        gp.value,
        gc.value
    );
    let cached_vars: std::collections::HashMap<String, candle_core::Var> =
        vars(cached.varmap()).into_iter().collect();
    let mut checked = 0;
    let mut worst = 0f32;
    for (name, var) in vars(plain.varmap()) {
        let a = gp
            .grads
            .get(var.as_tensor())
            .unwrap_or_else(|| panic!("no gradient for {name}"));
        let b = gc
            .grads
            .get(cached_vars[&name].as_tensor())
            .unwrap_or_else(|| panic!("cached: no gradient for {name}"));
        let d = (a - b)
            .unwrap()
            .abs()
            .unwrap()
            .flatten_all()
            .unwrap()
            .max(0)
            .unwrap()
            .to_scalar::<f32>()
            .unwrap();
        worst = worst.max(d);
        checked += 1;
    }
    assert!(checked > 90, "every parameter compared ({checked})");
    assert!(worst < 1e-5, "largest gradient difference {worst}");

    // with dropout: masks are keyed by (example, column), so the second pass replays the first's
    // and any chunking draws what plain MNR draws: the loss and a gradient agree again. That is
    // the engine's keying; candle's graph (CONDENSER_ENGINE=off) draws a stream a mini-batch,
    // which its second pass replays (gradcache.rs), so its draw differs from plain MNR's by design
    if condenser::model::engine::cpu::Stack::for_bert(&plain.enc.bert).is_none() {
        eprintln!(
            "cached_mnr_gives_plain_mnrs_gradients: candle's graph, no keyed masks to compare"
        );
        return;
    }
    let rates = condenser::model::DropoutRates::uniform(0.1);
    let drop = condenser::model::Dropout::new(rates, 3);
    let gp = plain.gradients(&idx, 7, Some(&drop), 1.0).unwrap();
    let gc = cached.gradients(&idx, 7, Some(&drop), 1.0).unwrap();
    assert!(
        (gp.value - gc.value).abs() < 1e-6,
        "{} vs {}",
        gp.value,
        gc.value
    );
    let name = "embeddings.word_embeddings.weight";
    let pick = |t: &condenser::train::biencoder::BiEncoderTask, g: &condenser::train::Gradients| {
        let v: std::collections::HashMap<String, candle_core::Var> =
            vars(t.varmap()).into_iter().collect();
        g.grads.get(v[name].as_tensor()).unwrap().clone()
    };
    let diff = (pick(&plain, &gp) - pick(&cached, &gc))
        .unwrap()
        .abs()
        .unwrap();
    assert!(
        diff.flatten_all()
            .unwrap()
            .max(0)
            .unwrap()
            .to_scalar::<f32>()
            .unwrap()
            < 1e-5
    );
}

#[test]
fn mini_batch_size_is_refused_for_a_loss_that_does_not_cache() {
    let d = tempfile::tempdir().unwrap();
    let o = condenser(&[
        "train-biencoder",
        "--init",
        common::model().to_str().unwrap(),
        "--loss",
        "mnr",
        "--mini-batch-size",
        "8",
        "--train",
        data("stsb/dev.parquet").to_str().unwrap(),
        "--columns",
        "sentence1,sentence2",
        "--out",
        d.path().join("o").to_str().unwrap(),
    ]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && e.contains("--mini-batch-size applies to cached losses"),
        "{e}"
    );
}

/// Cranfield split by `condenser split` (100 train queries) in `dir/cran`.
fn cranfield_split(dir: &Path) -> PathBuf {
    let out = dir.join("cran");
    let o = condenser(&[
        "split",
        "--retrieval",
        data("cranfield").to_str().unwrap(),
        "--train-queries",
        "100",
        "--seed",
        "0",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    out
}

fn table(path: &Path) -> Vec<serde_json::Map<String, serde_json::Value>> {
    let names = condenser::data::column_names(path).unwrap();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut rows = Vec::new();
    for b in condenser::data::open(path, &refs).unwrap() {
        let b = b.unwrap();
        for i in 0..b.num_rows() {
            let mut m = serde_json::Map::new();
            for n in &names {
                let v = match b.texts(n) {
                    Ok(t) => serde_json::json!(t[i]),
                    Err(_) => match b.labels(n) {
                        Ok(l) => serde_json::json!(l[i]),
                        Err(_) => serde_json::json!(b.vectors(n).unwrap()[i]),
                    },
                };
                m.insert(n.clone(), v);
            }
            rows.push(m);
        }
    }
    rows
}

#[test]
fn split_is_deterministic_and_disjoint() {
    let d = tempfile::tempdir().unwrap();
    let a = cranfield_split(d.path());
    let (train, test) = (
        RetrievalSet::load_split(&a, Some("train")).unwrap(),
        RetrievalSet::load_split(&a, Some("test")).unwrap(),
    );
    assert_eq!((train.queries.len(), test.queries.len()), (100, 125));
    let ids = |s: &RetrievalSet| {
        s.queries
            .iter()
            .map(|q| q.0.clone())
            .collect::<std::collections::HashSet<_>>()
    };
    assert!(ids(&train).is_disjoint(&ids(&test)));
    let b = cranfield_split(&d.path().join("again"));
    assert_eq!(
        ids(&RetrievalSet::load_split(&b, Some("train")).unwrap()),
        ids(&train)
    );
}

/// A fraction works on any folder (CACM's 52 judged queries: 26 and 26); dev folds carve a
/// split's train queries into k parts that cover them once each and never touch its test queries.
#[test]
fn test_fraction_and_dev_folds_over_the_train_queries() {
    let d = tempfile::tempdir().unwrap();
    let half = d.path().join("cacm");
    let split = |args: &[&str]| ok(condenser(&[&["split"], args].concat()));
    let cacm = data("cacm");
    split(&[
        "--retrieval",
        cacm.to_str().unwrap(),
        "--test-fraction",
        "0.5",
        "--seed",
        "0",
        "--out",
        half.to_str().unwrap(),
    ]);
    let ids = |dir: &Path, s: &str| -> std::collections::BTreeSet<String> {
        let set = RetrievalSet::load_split(dir, Some(s)).unwrap();
        set.queries.into_iter().map(|q| q.0).collect()
    };
    let (train, test) = (ids(&half, "train"), ids(&half, "test"));
    assert_eq!((train.len(), test.len()), (26, 26));
    let folds = d.path().join("folds");
    let t = split(&[
        "--retrieval",
        half.to_str().unwrap(),
        "--split",
        "train",
        "--folds",
        "3",
        "--seed",
        "0",
        "--out",
        folds.to_str().unwrap(),
    ]);
    assert!(t.contains("fold-2"), "{t}");
    let mut seen = std::collections::BTreeSet::new();
    for k in 0..3 {
        let f = folds.join(format!("fold-{k}"));
        let (tr, dev) = (ids(&f, "train"), ids(&f, "test"));
        assert!(tr.is_disjoint(&dev) && dev.is_disjoint(&test) && tr.is_disjoint(&test));
        assert_eq!(
            tr.union(&dev)
                .cloned()
                .collect::<std::collections::BTreeSet<_>>(),
            train
        );
        assert!(seen.is_disjoint(&dev));
        seen.extend(dev);
    }
    assert_eq!(seen, train);
    let e = err(condenser(&[
        "split",
        "--retrieval",
        cacm.to_str().unwrap(),
        "--folds",
        "1",
        "--out",
        d.path().join("x").to_str().unwrap(),
    ]));
    assert!(e.contains("--folds 1"), "{e}");
}

#[test]
fn mined_negatives_skip_positives_respect_filters_and_repeat_for_a_seed() {
    let d = tempfile::tempdir().unwrap();
    let cran = cranfield_split(d.path());
    let tiny = tiny_bert(d.path());
    let set = RetrievalSet::load_split(&cran, Some("train")).unwrap();
    let text: std::collections::HashMap<&str, &str> = set
        .corpus
        .iter()
        .map(|(i, t)| (i.as_str(), t.as_str()))
        .collect();
    let query: std::collections::HashMap<&str, &str> = set
        .queries
        .iter()
        .map(|(i, t)| (t.as_str(), i.as_str()))
        .collect();
    let mine = |name: &str, extra: &[&str]| {
        let out = d.path().join(name);
        let mut args = vec![
            "mine",
            "--model",
            tiny.to_str().unwrap(),
            "--retrieval",
            cran.to_str().unwrap(),
            "--split",
            "train",
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend(extra);
        let o = condenser(&args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        table(&out)
    };
    let rows = mine("top.parquet", &["--num-negatives", "3"]);
    assert!(rows.len() > 500);
    for r in &rows {
        let q = query[r["anchor"].as_str().unwrap()];
        let positives: Vec<&str> = set.relevant[q].iter().map(|d| text[d.as_str()]).collect();
        for k in ["negative_1", "negative_2", "negative_3"] {
            assert!(
                !positives.contains(&r[k].as_str().unwrap()),
                "a known positive mined as a negative"
            );
        }
    }
    // random sampling: the same seed gives the same rows, another seed others
    let args = |seed| vec!["--sampling", "random", "--range-max", "20", "--seed", seed];
    let r1 = mine("r1.parquet", &args("1"));
    assert_eq!(r1, mine("r1b.parquet", &args("1")));
    assert_ne!(r1, mine("r2.parquet", &args("2")));
}

#[test]
fn mining_bad_input_names_the_file() {
    let d = tempfile::tempdir().unwrap();
    let tiny = tiny_bert(d.path());
    let fail = |args: &[&str]| {
        let mut all = vec!["mine", "--model", tiny.to_str().unwrap()];
        all.extend(args);
        let o = condenser(&all);
        assert!(!o.status.success());
        String::from_utf8_lossy(&o.stderr).to_string()
    };
    let out = d.path().join("o.parquet");
    let out = out.to_str().unwrap();
    // a positive the corpus lacks
    let pairs = d.path().join("pairs.jsonl");
    std::fs::write(
        &pairs,
        "{\"anchor\": \"wing flutter\", \"positive\": \"a text nowhere else\"}\n",
    )
    .unwrap();
    let corpus = data("cranfield/corpus.parquet");
    let e = fail(&[
        "--input",
        pairs.to_str().unwrap(),
        "--corpus",
        corpus.to_str().unwrap(),
        "--out",
        out,
    ]);
    assert!(
        e.contains("pairs.jsonl: row 1, column 'positive'")
            && e.contains("not found in the corpus"),
        "{e}"
    );
    // an empty corpus
    let empty = d.path().join("corpus.jsonl");
    std::fs::write(&empty, "").unwrap();
    let e = fail(&[
        "--input",
        pairs.to_str().unwrap(),
        "--corpus",
        empty.to_str().unwrap(),
        "--out",
        out,
    ]);
    assert!(e.contains("corpus.jsonl"), "{e}");
    // qrels naming an unknown document
    let beir = beir_cranfield(d.path());
    let mut q = std::fs::OpenOptions::new()
        .append(true)
        .open(beir.join("qrels/test.tsv"))
        .unwrap();
    writeln!(q, "1\tno-such-doc\t1").unwrap();
    let e = fail(&["--retrieval", beir.to_str().unwrap(), "--out", out]);
    assert!(
        e.contains("test.tsv") && e.contains("unknown document 'no-such-doc'"),
        "{e}"
    );
    // a bi-encoder folder passed as the cross-encoder
    let cran = data("cranfield");
    let e = fail(&[
        "--retrieval",
        cran.to_str().unwrap(),
        "--cross-encoder",
        tiny.to_str().unwrap(),
        "--out",
        out,
    ]);
    assert!(
        e.contains("model.safetensors") && e.contains("not a cross-encoder"),
        "{e}"
    );
    assert!(!Path::new(out).exists(), "no output from a failed run");
}

/// Mining with cross-encoder rescoring and a margin filter: the cross-encoder is trained here (the
/// tiny BERT, 30 epochs) on the mined queries' positives against far BM25 candidates (ranks 100+)
/// until it separates them (average precision far above the base rate); every mined negative then
/// scores at
/// least the margin below its anchor's hardest positive, by the cross-encoder's scores written
/// per row, the margin column is their difference, the filter removed candidates, and the output
/// holds rows (the case once came back empty: a 3-step cross-encoder scored every pair alike, so
/// the filter dropped everything and the assertions held vacuously).
#[test]
fn mined_negatives_with_a_cross_encoder_keep_its_margin() {
    let d = tempfile::tempdir().unwrap();
    let cran = cranfield_split(d.path());
    let tiny = tiny_bert(d.path());
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let pairs = |split: &str| {
        let out = d.path().join(format!("pairs-{split}.parquet"));
        let o = condenser(&[
            "mine",
            "--candidates",
            "bm25",
            "--retrieval",
            &s(&cran),
            "--split",
            split,
            "--format",
            "labeled-pair",
            "--num-negatives",
            "7",
            "--range-min",
            "100",
            "--out",
            &s(&out),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        out
    };
    let train = pairs("train");
    let ce = d.path().join("ce");
    let o = condenser(&[
        "train-cross-encoder",
        "--model",
        &s(&tiny),
        "--train",
        &s(&train),
        "--columns",
        "anchor,positive,label",
        "--max-seq-length",
        "64",
        "--epochs",
        "30",
        "--batch-size",
        "16",
        "--lr",
        "1e-3",
        "--out",
        &s(&ce),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // it separates the pairs it will score: AP far above the share of positives
    let eval = d.path().join("eval");
    let o = condenser(&[
        "evaluate",
        "--model",
        &s(&ce),
        "--classification",
        &format!("test={}", s(&train)),
        "--columns",
        "anchor,positive,label",
        "--out",
        &s(&eval),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(eval.join("results.json")).unwrap()).unwrap();
    let labels = table(&train);
    let base = labels
        .iter()
        .filter(|r| r["label"].as_f64() == Some(1.0))
        .count() as f64
        / labels.len() as f64;
    let m = &r["results"][0]["metrics"];
    let ap = m
        .as_object()
        .unwrap()
        .iter()
        .find(|(k, _)| k.ends_with("ap"))
        .unwrap_or_else(|| panic!("{m}"))
        .1;
    assert!(
        ap.as_f64().unwrap() > base + 0.3,
        "AP {ap} vs base rate {base:.3}: {m}"
    );
    let out = d.path().join("ce-mined.parquet");
    let margin = 0.01;
    let o = condenser(&[
        "mine",
        "--model",
        &s(&tiny),
        "--retrieval",
        &s(&cran),
        "--split",
        "train",
        "--cross-encoder",
        &s(&ce),
        "--absolute-margin",
        &margin.to_string(),
        "--format",
        "triplet",
        "--range-max",
        "15",
        "--out",
        &s(&out),
    ]);
    let said = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let filtered: usize = said
        .split(" candidates filtered")
        .next()
        .and_then(|h| h.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{said}"));
    let rows = table(&out);
    println!("cross-encoder AP {ap} (base {base:.3}); {said}");
    assert!(
        rows.len() >= 50 && filtered > 0,
        "{} rows, {filtered} filtered: {said}",
        rows.len()
    );
    let mut hardest: std::collections::HashMap<&str, f64> = Default::default();
    for r in &rows {
        let h = hardest
            .entry(r["anchor"].as_str().unwrap())
            .or_insert(f64::INFINITY);
        *h = h.min(r["scores"][0].as_f64().unwrap());
    }
    assert!(
        hardest.len() >= 20,
        "negatives for {} anchors only",
        hardest.len()
    );
    for r in &rows {
        let (p, n) = (
            r["scores"][0].as_f64().unwrap(),
            r["scores"][1].as_f64().unwrap(),
        );
        assert!(
            n + margin <= hardest[r["anchor"].as_str().unwrap()] + 1e-6,
            "{r:?}"
        );
        assert!((r["margin"].as_f64().unwrap() - (p - n)).abs() < 1e-5);
    }
}
