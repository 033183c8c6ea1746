//! A new user's hostile input, across the commands (issue 53): every probe exits with the code it
//! should, its message names the cause, nothing panics, and every input's bytes are unchanged
//! afterwards. The outputs that would destroy an input (an output equal to it, inside its folder,
//! or holding it, through a link or a relative spelling) are refused by the one output guard
//! before anything is read; an existing model folder is written only with --resume or
//! --overwrite; misspelt recipe keys and variables, labels outside a loss's domain and a
//! --max-seq-length past the model's positions are refused; the cases handled before (missing,
//! empty, ragged, null, non-UTF-8 and wrongly named input, a broken model, an unwritable output,
//! --batch-size 0, a failed run over an existing output) stay so.
mod common;
use std::path::{Path, PathBuf};

/// Every file under `p` (or `p` itself) with its bytes.
fn snapshot(p: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    if p.is_dir() {
        for e in std::fs::read_dir(p).unwrap() {
            out.extend(snapshot(&e.unwrap().path()));
        }
    } else if p.exists() {
        out.push((p.to_path_buf(), std::fs::read(p).unwrap()));
    }
    out.sort();
    out
}

/// Run `args`; it must fail (or succeed, `ok`), its output naming every string of `says`, no
/// panic, and every path of `inputs` byte for byte as before.
fn probe(args: &[&str], inputs: &[&Path], ok: bool, says: &[&str]) -> String {
    let before: Vec<_> = inputs.iter().map(|p| snapshot(p)).collect();
    let o = common::condenser(args);
    let text =
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.success(), ok, "{args:?}: {text}");
    assert!(!text.contains("panicked"), "{args:?} panicked: {text}");
    for s in says {
        assert!(text.contains(s), "{args:?} does not say '{s}': {text}");
    }
    for (p, b) in inputs.iter().zip(before) {
        assert!(
            snapshot(p) == b,
            "{args:?} changed its input {}",
            p.display()
        );
    }
    text
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A pairs CSV `name` in `dir` from its rows (header first).
fn csv(dir: &Path, name: &str, rows: &[&str]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, rows.join("\n") + "\n").unwrap();
    p
}

fn pairs(dir: &Path) -> PathBuf {
    csv(
        dir,
        "pairs.csv",
        &[
            "sentence1,sentence2,label",
            "A man plays a guitar.,A man is playing music.,0.8",
            "A dog runs.,A cat sleeps.,0.1",
            "Two kids swim.,Children are swimming.,0.9",
            "A woman cooks.,Someone reads a book.,0.0",
        ],
    )
}

/// A retrieval folder of its own (Cranfield's files copied): nothing here may touch ../shared.
fn retrieval(dir: &Path) -> PathBuf {
    let d = dir.join("cranfield");
    std::fs::create_dir(&d).unwrap();
    for f in ["corpus.parquet", "queries.parquet", "qrels.parquet"] {
        std::fs::copy(common::data("cranfield").join(f), d.join(f)).unwrap();
    }
    d
}

#[test]
fn outputs_that_would_replace_an_input_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let tiny = common::tiny_bert(d.path());
    let cf = retrieval(d.path());
    let x = pairs(d.path());
    let split = |out: &Path, says: &str| {
        let args = [
            "split",
            "--retrieval",
            s(&cf),
            "--out",
            s(out),
            "--test-fraction",
            "0.5",
        ];
        probe(&args, &[&cf], false, &[says, s(&cf)]);
    };
    // 1. split into its own folder (it truncated corpus and queries to 0 bytes), or inside it
    split(&cf, "is the input --retrieval");
    split(&cf.join("sub"), "lies inside the input folder");
    split(d.path(), "contains the input");
    // the same folder through a link and through `..`
    let link = d.path().join("link");
    std::os::unix::fs::symlink(&cf, &link).unwrap();
    split(&link, "is the input");
    split(&cf.join("not-yet/.."), "is the input");
    // 2. convert and encode over their input, augment over its input
    let q = cf.join("queries.parquet");
    let args = ["convert", s(&q), s(&q), "--sample", "10"];
    probe(&args, &[&cf], false, &["OUTPUT", "is the input INPUT"]);
    let csv_out = x.with_file_name("pairs.csv");
    let args = [
        "encode",
        "--model",
        s(&tiny),
        "--input",
        s(&x),
        "--out",
        s(&csv_out),
    ];
    probe(
        &args,
        &[&x, &tiny],
        false,
        &["--out", "is the input --input"],
    );
    let args = [
        "encode",
        "--model",
        s(&tiny),
        "--input",
        s(&x),
        "--out",
        s(&tiny),
    ];
    probe(&args, &[&x, &tiny], false, &["is the input --model"]);
    let args = [
        "augment",
        "--input",
        s(&x),
        "--cross-encoder",
        s(&tiny),
        "--out",
        s(&x),
    ];
    probe(&args, &[&x, &tiny], false, &["is the input --input"]);
    let pseudo = cf.join("pseudo.parquet");
    let args = ["augment", "--corpus", s(&cf), "--out", s(&pseudo)];
    probe(&args, &[&cf], false, &["inside the input folder --corpus"]);
    // 3. interpolate over the fine-tuned model
    let end = d.path().join("end");
    copy_dir(&tiny, &end);
    let args = [
        "interpolate",
        "--start",
        s(&tiny),
        "--end",
        s(&end),
        "--out",
        s(&end),
    ];
    probe(&args, &[&tiny, &end], false, &["is the input --end"]);
}

#[test]
fn an_existing_model_folder_needs_resume_or_overwrite() {
    let d = tempfile::tempdir().unwrap();
    let tiny = common::tiny_bert(d.path());
    let x = pairs(d.path());
    let out = d.path().join("model");
    let train = |extra: &[&str], ok: bool, says: &[&str]| {
        let mut a = vec!["train-biencoder", "--init", s(&tiny), "--train", s(&x)];
        a.extend(["--loss", "cosine", "--max-steps", "1", "--batch-size", "2"]);
        a.extend(["--out", s(&out)]);
        a.extend(extra);
        let inputs: Vec<&Path> = match ok {
            true => vec![&tiny, &x],
            false => vec![&tiny, &x, &out],
        };
        probe(&a, &inputs, ok, says);
    };
    train(&[], true, &["wrote"]);
    // 3. again into the trained model: refused, saying how to go on; the model stays as it was
    train(
        &[],
        false,
        &["already holds a model", "--resume", "--overwrite"],
    );
    train(&["--overwrite"], true, &["wrote"]);
    train(&["--resume"], true, &["already finished"]);
    // interpolate into an existing folder likewise
    let args = [
        "interpolate",
        "--start",
        s(&tiny),
        "--end",
        s(&out),
        "--out",
        s(&tiny),
    ];
    probe(&args, &[&tiny, &out], false, &["is the input --start"]);
    let mixed = d.path().join("mixed");
    let args = [
        "interpolate",
        "--start",
        s(&tiny),
        "--end",
        s(&out),
        "--out",
        s(&mixed),
    ];
    probe(&args, &[&tiny, &out], true, &["tensors"]);
    probe(&args, &[&tiny, &out, &mixed], false, &["--overwrite"]);
    let mut again = args.to_vec();
    again.push("--overwrite");
    probe(&again, &[&tiny, &out], true, &["tensors"]);
}

#[test]
fn recipe_keys_and_variables_are_checked_before_any_step_runs() {
    let d = tempfile::tempdir().unwrap();
    let x = pairs(d.path());
    let out = d.path().join("out");
    let recipe = |extra: &str| {
        let p = d.path().join("r.toml");
        let text = format!(
            "[vars]\ngold = \"2\"\nout = \"{}\"\n\n[[step]]\nname = \"sample\"\ncommand = \
             \"convert\"\npositional = [\"{}\", \"{{out}}/s.parquet\"]\nargs = {{ sample = \
             \"{{gold}}\" }}\n{extra}\n",
            out.display(),
            x.display()
        );
        std::fs::write(&p, text).unwrap();
        p
    };
    // 4. a misspelt step key, an unknown field, a misspelt --set, a misspelt flag in args
    for dry in [false, true] {
        let run = |r: &Path, set: &[&str], says: &[&str]| {
            let mut a = vec!["run", s(r)];
            a.extend(set);
            if dry {
                a.push("--dry-run");
            }
            probe(&a, &[r, &x], false, says);
            assert!(!out.join("s.parquet").exists(), "a step ran");
        };
        run(
            &recipe("argz = { batch-size = 8 }"),
            &[],
            &["'argz'", "did you mean 'args'"],
        );
        run(
            &recipe("after = [\"x\"]"),
            &[],
            &["unknown key 'after'", "valid: name"],
        );
        run(
            &recipe(""),
            &["--set", "golld=2000"],
            &["golld", "did you mean 'gold'"],
        );
        let flag = recipe("").to_string_lossy().into_owned();
        std::fs::write(
            &flag,
            std::fs::read_to_string(&flag)
                .unwrap()
                .replace("sample =", "smaple ="),
        )
        .unwrap();
        run(Path::new(&flag), &[], &["--smaple", "--sample"]);
    }
    let r = recipe("");
    probe(
        &["run", s(&r), "--set", "gold=3"],
        &[&r, &x],
        true,
        &["wrote 3 rows"],
    );
}

#[test]
fn labels_outside_the_loss_domain_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let tiny = common::tiny_bert(d.path());
    let seven = csv(
        d.path(),
        "sts05.csv",
        &[
            "sentence1,sentence2,label",
            "a b,c d,0.5",
            "e f,g h,7.0",
            "i j,k l,1.0",
        ],
    );
    let out = d.path().join("m");
    // 5. cosine: a score in [-1, 1]; the message names file, row, column and value
    let args = [
        "train-biencoder",
        "--init",
        s(&tiny),
        "--train",
        s(&seven),
        "--loss",
        "cosine",
        "--out",
        s(&out),
    ];
    probe(
        &args,
        &[&seven, &tiny],
        false,
        &["sts05.csv", "row 2", "'label'", "label 7", "[-1, 1]"],
    );
    assert!(!out.exists());
    // softmax: class ids below --num-labels; a cross-encoder's one label: [0, 1]
    let args = [
        "train-biencoder",
        "--init",
        s(&tiny),
        "--train",
        s(&seven),
        "--loss",
        "softmax",
        "--out",
        s(&out),
    ];
    probe(&args, &[&seven], false, &["row 1", "label 0.5", "class id"]);
    let args = [
        "train-cross-encoder",
        "--model",
        s(&tiny),
        "--train",
        s(&seven),
        "--out",
        s(&out),
    ];
    probe(&args, &[&seven], false, &["row 2", "label 7", "[0, 1]"]);
}

#[test]
fn max_seq_length_past_the_positions_is_refused_and_a_saved_model_keeps_its_length() {
    let d = tempfile::tempdir().unwrap();
    let tiny = common::tiny_bert(d.path());
    let x = pairs(d.path());
    // 6. encode past the tiny model's 128 positions
    let e = d.path().join("e.parquet");
    let args = [
        "encode",
        "--model",
        s(&tiny),
        "--input",
        s(&x),
        "--columns",
        "sentence1",
        "--out",
        s(&e),
        "--max-seq-length",
        "100000",
    ];
    probe(
        &args,
        &[&x, &tiny],
        false,
        &["--max-seq-length 100000", "128 positions"],
    );
    // a start that declares max_seq_length 100 keeps it when trained at the default 128 (cut to
    // the positions) unless --max-seq-length is given
    let start = d.path().join("st");
    copy_dir(&tiny, &start);
    std::fs::write(
        start.join("sentence_bert_config.json"),
        r#"{"max_seq_length": 100}"#,
    )
    .unwrap();
    let saved = |extra: &[&str], name: &str| -> u64 {
        let out = d.path().join(name);
        let mut a = vec!["train-biencoder", "--init", s(&start), "--train", s(&x)];
        a.extend(["--loss", "cosine", "--max-steps", "1", "--out", s(&out)]);
        a.extend(extra);
        probe(&a, &[&start, &x], true, &["wrote"]);
        let c = std::fs::read_to_string(out.join("sentence_bert_config.json")).unwrap();
        serde_json::from_str::<serde_json::Value>(&c).unwrap()["max_seq_length"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(saved(&[], "keeps"), 100);
    assert_eq!(saved(&["--max-seq-length", "64"], "given"), 64);
}

#[test]
fn bad_input_handled_before_stays_handled() {
    let d = tempfile::tempdir().unwrap();
    let tiny = common::tiny_bert(d.path());
    let x = pairs(d.path());
    let out = d.path().join("e.parquet");
    let encode = |input: &Path, extra: &[&str], says: &[&str]| {
        let mut a = vec![
            "encode",
            "--model",
            s(&tiny),
            "--input",
            s(input),
            "--out",
            s(&out),
        ];
        a.extend(extra);
        probe(&a, &[input, &tiny], false, says);
    };
    let col = ["--columns", "sentence1"];
    encode(&d.path().join("missing.csv"), &col, &["missing.csv"]);
    let empty = csv(d.path(), "empty.csv", &[]);
    encode(&empty, &col, &["empty.csv"]);
    encode(
        &x,
        &["--columns", "sentense1"],
        &["'sentense1'", "sentence1, sentence2, label"],
    );
    let ragged = csv(
        d.path(),
        "ragged.csv",
        &["sentence1,sentence2", "a,b", "c,d,e,f"],
    );
    encode(&ragged, &col, &["ragged.csv", "2"]);
    let null = d.path().join("null.jsonl");
    std::fs::write(&null, "{\"sentence1\": \"a\"}\n{\"sentence1\": null}\n").unwrap();
    encode(&null, &col, &["null.jsonl", "row 2", "sentence1"]);
    let latin1 = d.path().join("latin1.csv");
    std::fs::write(&latin1, b"sentence1\ncaf\xe9\n").unwrap();
    encode(&latin1, &col, &["latin1.csv"]);
    encode(
        &x,
        &["--columns", "sentence1", "--batch-size", "0"],
        &["--batch-size"],
    );
    // a broken model: weights cut short, or random bytes
    for (name, bytes) in [("cut", None), ("random", Some(vec![0x5au8; 4096]))] {
        let m = d.path().join(name);
        copy_dir(&tiny, &m);
        let w = m.join("model.safetensors");
        let b = bytes.unwrap_or_else(|| std::fs::read(&w).unwrap()[..1000].to_vec());
        std::fs::write(&w, b).unwrap();
        let a = [
            "encode",
            "--model",
            s(&m),
            "--input",
            s(&x),
            "--columns",
            "sentence1",
            "--out",
            s(&out),
        ];
        probe(&a, &[&m, &x], false, &["model.safetensors"]);
    }
    // an output that cannot be written (a file where its folder should be)
    let blocker = csv(d.path(), "blocker", &["x"]);
    let under = blocker.join("e.parquet");
    let a = [
        "encode",
        "--model",
        s(&tiny),
        "--input",
        s(&x),
        "--columns",
        "sentence1",
        "--out",
        s(&under),
    ];
    probe(&a, &[&x, &blocker], false, &["blocker"]);
    // a failed run over an existing output keeps the old bytes
    let a = [
        "encode",
        "--model",
        s(&tiny),
        "--input",
        s(&x),
        "--columns",
        "sentence1",
        "--out",
        s(&out),
    ];
    probe(&a, &[&x], true, &["wrote 4 rows"]);
    let mut bad = a.to_vec();
    bad[6] = "nope";
    probe(&bad, &[&x, &out], false, &["'nope'"]);
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        let dest = to.join(p.file_name().unwrap());
        if p.is_dir() {
            copy_dir(&p, &dest);
        } else {
            std::fs::copy(&p, dest).unwrap();
        }
    }
}
