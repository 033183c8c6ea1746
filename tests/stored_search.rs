//! Corpus embeddings stored once (`encode`) and used by mine, evaluate and search: the same
//! results as embedding on the fly, sharded search merged equal to one run, streamed exact search
//! equal to a full sort, and stores made otherwise refused by name.
mod common;
use common::{condenser, data, err, minilm_layers, ok};
use condenser::model::Embeddings;
use condenser::search::{search, ScoreFn};
use std::path::Path;

/// Two runs of (query_id, rank, doc_id, score) from corpus vectors encoded whole and in shards:
/// a shard's texts share batches with other texts, and on some BLAS kernels (OpenBLAS's Haswell
/// sgemm on a Zen 3) a text's bits depend on its batch, so scores agree to rounding (1e-5), not
/// bit for bit; every query and rank is there and all but near-ties keep their document.
fn same_ranking(got: &[Vec<String>], want: &[Vec<String>]) {
    assert_eq!(got.len(), want.len());
    let mut moved = 0;
    for (g, w) in got.iter().zip(want) {
        assert_eq!(g[..2], w[..2], "query and rank");
        let (a, b): (f64, f64) = (g[3].parse().unwrap(), w[3].parse().unwrap());
        assert!((a - b).abs() <= 1e-5, "{g:?} vs {w:?}");
        moved += usize::from(g[2] != w[2]);
    }
    assert!(
        moved * 100 <= want.len(),
        "{moved} of {} rows changed document",
        want.len()
    );
}

fn rows(path: &Path, cols: &[&str]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for b in condenser::data::open(path, cols).unwrap() {
        let b = b.unwrap();
        let columns: Vec<Vec<String>> = cols
            .iter()
            .map(|c| match *c {
                "score" => b
                    .labels(c)
                    .unwrap()
                    .iter()
                    .map(|x| format!("{x:.6}"))
                    .collect(),
                _ => b.ids(c).unwrap(),
            })
            .collect();
        for i in 0..b.num_rows() {
            out.push(columns.iter().map(|c| c[i].clone()).collect());
        }
    }
    out
}

#[test]
fn stored_embeddings_mine_and_evaluate_as_on_the_fly_and_shards_merge() {
    let dir = tempfile::tempdir().unwrap();
    let model = minilm_layers(dir.path(), 1);
    let (m, cran) = (model.to_str().unwrap(), data("cranfield"));
    let cran = cran.to_str().unwrap();
    let emb = dir.path().join("corpus-emb.parquet");
    let e = emb.to_str().unwrap();
    let len = ["--max-seq-length", "64"];
    let encode = |extra: &[&str], out: &str| {
        let mut a = vec!["encode", "--model", m, "--input", cran, "--out", out];
        a.extend_from_slice(&len);
        a.extend_from_slice(extra);
        ok(condenser(&a));
    };
    encode(&[], e);

    // mining from the stored vectors: the same negatives, row for row
    let mine = |stored: Option<&str>, out: &Path| {
        let mut a = vec![
            "mine",
            "--model",
            m,
            "--retrieval",
            cran,
            "--num-negatives",
            "2",
            "--output-scores",
            "--out",
            out.to_str().unwrap(),
        ];
        a.extend_from_slice(&len);
        if let Some(s) = stored {
            a.extend_from_slice(&["--corpus-embeddings", s]);
        }
        ok(condenser(&a))
    };
    let (fly, st) = (
        dir.path().join("fly.parquet"),
        dir.path().join("stored.parquet"),
    );
    mine(None, &fly);
    mine(Some(e), &st);
    let cols = ["anchor", "positive", "negative_1", "negative_2"];
    let (a, b) = (rows(&fly, &cols), rows(&st, &cols));
    assert!(a.len() > 100, "{} rows", a.len());
    assert_eq!(
        a, b,
        "stored-embedding mining differs from on-the-fly mining"
    );

    // evaluate with the stored corpus: the same metrics
    let eval = |stored: Option<&str>, out: &Path| {
        let set = format!("cran={cran}");
        let mut a = vec![
            "evaluate",
            "--model",
            m,
            "--retrieval",
            &set,
            "--out",
            out.to_str().unwrap(),
        ];
        a.extend_from_slice(&len);
        if let Some(s) = stored {
            a.extend_from_slice(&["--corpus-embeddings", s]);
        }
        ok(condenser(&a));
        std::fs::read_to_string(out.join("results.csv")).unwrap()
    };
    let (x, y) = (
        eval(None, &dir.path().join("e1")),
        eval(Some(e), &dir.path().join("e2")),
    );
    assert!(x.contains("cosine_ndcg@10"));
    // compared whole: the out folders are not in the CSV (a replace of "e1" / "e2" there also hit
    // the random temp folder's name in the model column, about one run in 400)
    assert_eq!(
        x, y,
        "evaluate on stored embeddings differs from on-the-fly"
    );

    // search: a sharded encode read as a folder, sharded search merged = one run
    let shards = dir.path().join("shards");
    std::fs::create_dir_all(&shards).unwrap();
    let se = shards.join("corpus-emb.parquet");
    for i in 0..2 {
        encode(&["--shard", &format!("{i}/2")], se.to_str().unwrap());
    }
    let run = dir.path().join("run.parquet");
    let search = |corpus: &Path, out: &Path, extra: &[&str]| {
        let mut a = vec![
            "search",
            "--corpus-embeddings",
            corpus.to_str().unwrap(),
            "--model",
            m,
            "--queries",
            cran,
            "--top-k",
            "20",
            "--out",
            out.to_str().unwrap(),
        ];
        a.extend_from_slice(&len);
        a.extend_from_slice(extra);
        ok(condenser(&a))
    };
    search(&emb, &run, &[]);
    let one = rows(&run, &["query_id", "rank", "doc_id", "score"]);
    assert_eq!(one.len(), 225 * 20);
    let from_folder = dir.path().join("run-folder.parquet");
    search(&shards, &from_folder, &[]);
    same_ranking(
        &rows(&from_folder, &["query_id", "rank", "doc_id", "score"]),
        &one,
    );
    // merged, the shards keep the record of how they were made
    ok(condenser(&["merge", se.to_str().unwrap()]));
    let from_merged = dir.path().join("run-merged.parquet");
    search(&se, &from_merged, &[]);
    same_ranking(
        &rows(&from_merged, &["query_id", "rank", "doc_id", "score"]),
        &one,
    );
    // 225 queries in blocks of 1,024: shard 1 of 2 holds none; still a valid shard
    for i in 0..2 {
        search(&emb, &run, &["--shard", &format!("{i}/2")]);
    }
    std::fs::remove_file(&run).unwrap();
    ok(condenser(&["merge", run.to_str().unwrap()]));
    assert_eq!(rows(&run, &["query_id", "rank", "doc_id", "score"]), one);
    // a store re-encoded between two shards (here from other texts, made alike) stops the merge
    let changed = dir.path().join("changed.parquet");
    std::fs::copy(&emb, &changed).unwrap();
    std::fs::remove_file(&run).unwrap();
    search(&changed, &run, &["--shard", "0/2"]);
    let queries = data("cranfield/queries.parquet");
    let (q, c) = (queries.to_str().unwrap(), changed.to_str().unwrap());
    ok(condenser(&[
        "encode",
        "--model",
        m,
        "--input",
        q,
        "--columns",
        "text",
        "--out",
        c,
        "--max-seq-length",
        "64",
    ]));
    search(&changed, &run, &["--shard", "1/2"]);
    let msg = err(condenser(&["merge", run.to_str().unwrap()]));
    assert!(msg.contains("inputs_fingerprint"), "{msg}");

    // a store made otherwise is refused, naming the difference
    let other = minilm_layers(&dir.path().join("o"), 2);
    let msg = err(condenser(&[
        "mine",
        "--model",
        other.to_str().unwrap(),
        "--retrieval",
        cran,
        "--max-seq-length",
        "64",
        "--corpus-embeddings",
        e,
        "--out",
        dir.path().join("x.parquet").to_str().unwrap(),
    ]));
    assert!(
        msg.contains("model fingerprint") && msg.contains("corpus-emb.parquet"),
        "{msg}"
    );
    let msg = err(condenser(&[
        "evaluate",
        "--model",
        m,
        "--retrieval",
        &format!("cran={cran}"),
        "--max-seq-length",
        "128",
        "--corpus-embeddings",
        e,
        "--out",
        dir.path().join("e3").to_str().unwrap(),
    ]));
    assert!(msg.contains("max_seq_length 64 (the model: 128)"), "{msg}");
    assert!(!msg.contains("fingerprint"), "{msg}");
}

/// The streamed, block-by-block search keeps exactly what a full sort of every score keeps,
/// ties (many equal vectors) ordered by document id.
#[test]
fn streamed_search_equals_a_full_sort() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let dim = 16;
    let docs = 10_000; // more than two blocks
    let mut c: Vec<f32> = (0..docs * dim)
        .map(|_| rng.random_range(-1.0..1.0))
        .collect();
    // duplicates: equal scores across block boundaries
    for d in (0..docs).step_by(997) {
        let (src, dst) = (0, d * dim);
        for j in 0..dim {
            c[dst + j] = c[src + j];
        }
    }
    let q: Vec<f32> = (0..37 * dim).map(|_| rng.random_range(-1.0..1.0)).collect();
    let (q, c) = (Embeddings { dim, data: q }, Embeddings { dim, data: c });
    let ids: Vec<String> = (0..docs)
        .map(|i| format!("d{:05}", (i * 7919) % docs))
        .collect();
    for score in [ScoreFn::Cosine, ScoreFn::Dot] {
        for k in [1, 10, 250] {
            let got = search(&q, &c, &ids, score, k);
            for (qi, hits) in got.iter().enumerate() {
                let mut all: Vec<(usize, f32)> = (0..docs)
                    .map(|d| {
                        let (a, b) = (q.row(qi), c.row(d));
                        let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
                        let n = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
                        match score {
                            ScoreFn::Cosine => (d, dot / (n(a) * n(b))),
                            ScoreFn::Dot => (d, dot),
                        }
                    })
                    .collect();
                all.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| ids[a.0].cmp(&ids[b.0])));
                let want: Vec<usize> = all[..k].iter().map(|h| h.0).collect();
                let have: Vec<usize> = hits.iter().map(|h| h.0).collect();
                // BLAS sums in another order: equal up to near-ties only
                let mismatch = want.iter().zip(&have).filter(|(a, b)| a != b).count();
                assert!(mismatch <= 2, "query {qi} k {k}: {want:?} vs {have:?}");
                for (h, w) in hits.iter().zip(&all[..k]) {
                    assert!((h.1 - w.1).abs() < 1e-5);
                }
                // duplicates (equal vectors) come out in id order
                let dups: Vec<&String> = have
                    .iter()
                    .filter(|&&d| d % 997 == 0)
                    .map(|&d| &ids[d])
                    .collect();
                assert!(dups.windows(2).all(|w| w[0] < w[1]) || dups.len() < 2);
            }
        }
    }
}

/// evaluate's --vector-cache: the same results as encoding every time, the second evaluation
/// reads the file the first wrote (a damaged file is refused by name, so it was read), and a
/// model with other weights or another max length gets its own file, never another's vectors.
#[test]
fn a_vector_cache_reads_back_only_the_same_encoding() {
    let dir = tempfile::tempdir().unwrap();
    let (one, two) = (minilm_layers(dir.path(), 1), minilm_layers(dir.path(), 2));
    let cran = data("cranfield");
    let set = format!("cran={}", cran.display());
    let cache = dir.path().join("vectors");
    let eval = |model: &Path, len: &str, cached: bool, out: &str| {
        let out = dir.path().join(out);
        let mut a = vec![
            "evaluate",
            "--model",
            model.to_str().unwrap(),
            "--retrieval",
            &set,
        ];
        a.extend_from_slice(&["--max-seq-length", len, "--out", out.to_str().unwrap()]);
        if cached {
            a.extend_from_slice(&["--vector-cache", cache.to_str().unwrap()]);
        }
        let o = condenser(&a);
        (o, out.join("results.csv"))
    };
    let files = || std::fs::read_dir(&cache).map_or(0, |d| d.count());
    let csv = |(o, p): (std::process::Output, std::path::PathBuf)| {
        ok(o);
        std::fs::read_to_string(p).unwrap()
    };
    let fresh = csv(eval(&one, "64", false, "fresh"));
    assert_eq!(files(), 0);
    assert_eq!(csv(eval(&one, "64", true, "cold")), fresh);
    assert_eq!(files(), 1, "one model on one corpus: one file");
    assert_eq!(csv(eval(&one, "64", true, "warm")), fresh);
    assert_eq!(files(), 1, "read back, not written again");
    // other weights, another max length: their own files
    let other = csv(eval(&two, "64", true, "two"));
    assert_ne!(other, fresh);
    assert_eq!(csv(eval(&two, "64", false, "two-fresh")), other);
    csv(eval(&one, "32", true, "short"));
    assert_eq!(files(), 3);
    // the warm run read the file: damaged, it is refused by name
    let file = std::fs::read_dir(&cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .min_by_key(|p| std::fs::metadata(p).unwrap().modified().unwrap())
        .unwrap();
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[100] ^= 1;
    std::fs::write(&file, bytes).unwrap();
    let msg = err(eval(&one, "64", true, "damaged").0);
    assert!(
        msg.contains(&file.display().to_string()) && msg.contains("checksum"),
        "{msg}"
    );
}
