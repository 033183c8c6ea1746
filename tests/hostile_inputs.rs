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

/// Run the command line `line` (arguments split on spaces: the temporary paths hold none); it
/// must fail (or succeed, `ok`), its output naming every string of `says`, no panic, and every
/// path of `inputs` byte for byte as before.
fn probe(line: &str, inputs: &[&Path], ok: bool, says: &[&str]) -> String {
    let args: Vec<&str> = line.split_whitespace().collect();
    let before: Vec<_> = inputs.iter().map(|p| snapshot(p)).collect();
    let o = common::condenser(&args);
    let text =
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.success(), ok, "{line}: {text}");
    assert!(!text.contains("panicked"), "{line} panicked: {text}");
    for s in says {
        assert!(text.contains(s), "{line} does not say '{s}': {text}");
    }
    for (p, b) in inputs.iter().zip(before) {
        assert!(snapshot(p) == b, "{line} changed its input {}", p.display());
    }
    text
}

/// A CSV `name` in `dir` from its rows (header first).
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

#[test]
fn outputs_that_would_replace_an_input_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let tiny = common::tiny_bert(d.path()).display().to_string();
    let cf = retrieval(d.path());
    let x = pairs(d.path());
    let (t, c, xs) = (Path::new(&tiny), cf.display(), x.display());
    let split = |out: &Path, says: &str| {
        let line = format!(
            "split --retrieval {c} --out {} --test-fraction 0.5",
            out.display()
        );
        probe(&line, &[&cf], false, &[says, &c.to_string()]);
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
    // 2. convert and encode over their input, augment over its input or into its corpus
    let q = cf.join("queries.parquet").display().to_string();
    let line = format!("convert {q} {q} --sample 10");
    probe(&line, &[&cf], false, &["OUTPUT", "is the input INPUT"]);
    let line = format!("encode --model {tiny} --input {xs} --out {xs}");
    probe(&line, &[&x, t], false, &["--out", "is the input --input"]);
    let line = format!("encode --model {tiny} --input {xs} --out {tiny}");
    probe(&line, &[&x, t], false, &["is the input --model"]);
    let line = format!("augment --input {xs} --cross-encoder {tiny} --out {xs}");
    probe(&line, &[&x, t], false, &["is the input --input"]);
    let line = format!("augment --corpus {c} --out {c}/pseudo.parquet");
    probe(&line, &[&cf], false, &["inside the input folder --corpus"]);
    // 3. interpolate over the fine-tuned model
    let end = d.path().join("end");
    copy_dir(t, &end);
    let e = end.display();
    let line = format!("interpolate --start {tiny} --end {e} --out {e}");
    probe(&line, &[t, &end], false, &["is the input --end"]);
}

#[test]
fn an_existing_model_folder_needs_resume_or_overwrite() {
    let d = tempfile::tempdir().unwrap();
    let tiny = common::tiny_bert(d.path());
    let x = pairs(d.path());
    let out = d.path().join("model");
    let (t, xs, o) = (tiny.display(), x.display(), out.display());
    let train = |extra: &str, ok: bool, says: &[&str]| {
        let line = format!(
            "train-biencoder --init {t} --train {xs} --loss cosine --max-steps 1 --batch-size 2 \
             --out {o} {extra}"
        );
        let inputs: Vec<&Path> = match ok {
            true => vec![&tiny, &x],
            false => vec![&tiny, &x, &out],
        };
        probe(&line, &inputs, ok, says);
    };
    train("", true, &["wrote"]);
    // 3. again into the trained model: refused, saying how to go on; the model stays as it was
    train(
        "",
        false,
        &["already holds a model", "--resume", "--overwrite"],
    );
    train("--overwrite", true, &["wrote"]);
    train("--resume", true, &["already finished"]);
    // interpolate: never over an input, and into an existing folder only with --overwrite
    let line = format!("interpolate --start {t} --end {o} --out {t}");
    probe(&line, &[&tiny, &out], false, &["is the input --start"]);
    let mixed = d.path().join("mixed");
    let line = format!(
        "interpolate --start {t} --end {o} --out {}",
        mixed.display()
    );
    probe(&line, &[&tiny, &out], true, &["tensors"]);
    probe(&line, &[&tiny, &out, &mixed], false, &["--overwrite"]);
    probe(&(line + " --overwrite"), &[&tiny, &out], true, &["tensors"]);
}

#[test]
fn recipe_keys_and_variables_are_checked_before_any_step_runs() {
    let d = tempfile::tempdir().unwrap();
    let x = pairs(d.path());
    let out = d.path().join("out");
    let recipe = |extra: &str, flag: &str| {
        let p = d.path().join("r.toml");
        let text = format!(
            "[vars]\ngold = \"2\"\nout = \"{}\"\n\n[[step]]\nname = \"sample\"\ncommand = \
             \"convert\"\npositional = [\"{}\", \"{{out}}/s.parquet\"]\nargs = {{ {flag} = \
             \"{{gold}}\" }}\n{extra}\n",
            out.display(),
            x.display()
        );
        std::fs::write(&p, text).unwrap();
        p
    };
    // 4. a misspelt step key, an unknown field, a misspelt --set, a misspelt flag in args
    for dry in ["", " --dry-run"] {
        let run = |r: &Path, set: &str, says: &[&str]| {
            let line = format!("run {}{set}{dry}", r.display());
            probe(&line, &[r, &x], false, says);
            assert!(!out.join("s.parquet").exists(), "a step ran");
        };
        let argz = recipe("argz = { batch-size = 8 }", "sample");
        run(&argz, "", &["'argz'", "did you mean 'args'"]);
        let after = recipe("after = [\"x\"]", "sample");
        run(&after, "", &["unknown key 'after'", "valid: name"]);
        let set = recipe("", "sample");
        run(&set, " --set golld=2000", &["golld", "did you mean 'gold'"]);
        run(&recipe("", "smaple"), "", &["--smaple", "--sample"]);
    }
    let r = recipe("", "sample");
    let line = format!("run {} --set gold=3", r.display());
    probe(&line, &[&r, &x], true, &["wrote 3 rows"]);
}

#[test]
fn labels_outside_the_loss_domain_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let tiny = common::tiny_bert(d.path());
    let rows = [
        "sentence1,sentence2,label",
        "a b,c d,0.5",
        "e f,g h,7.0",
        "i j,k l,1.0",
    ];
    let seven = csv(d.path(), "sts05.csv", &rows);
    let out = d.path().join("m");
    let (t, s7, o) = (tiny.display(), seven.display(), out.display());
    // 5. cosine: a score in [-1, 1]; the message names file, row, column and value
    let line = format!("train-biencoder --init {t} --train {s7} --loss cosine --out {o}");
    let says = ["sts05.csv", "row 2", "'label'", "label 7", "[-1, 1]"];
    probe(&line, &[&seven, &tiny], false, &says);
    assert!(!out.exists());
    // softmax: class ids below --num-labels; a cross-encoder's one label: [0, 1]
    let line = format!("train-biencoder --init {t} --train {s7} --loss softmax --out {o}");
    probe(&line, &[&seven], false, &["row 1", "label 0.5", "class id"]);
    let line = format!("train-cross-encoder --model {t} --train {s7} --out {o}");
    probe(&line, &[&seven], false, &["row 2", "label 7", "[0, 1]"]);
}

#[test]
fn max_seq_length_past_the_positions_is_refused_and_a_saved_model_keeps_its_length() {
    let d = tempfile::tempdir().unwrap();
    let tiny = common::tiny_bert(d.path());
    let x = pairs(d.path());
    let (t, xs) = (tiny.display(), x.display());
    // 6. encode past the tiny model's 128 positions
    let e = d.path().join("e.parquet");
    let line = format!(
        "encode --model {t} --input {xs} --columns sentence1 --out {} --max-seq-length 100000",
        e.display()
    );
    probe(
        &line,
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
    let saved = |extra: &str, name: &str| -> u64 {
        let out = d.path().join(name);
        let line = format!(
            "train-biencoder --init {} --train {xs} --loss cosine --max-steps 1 --out {} {extra}",
            start.display(),
            out.display()
        );
        probe(&line, &[&start, &x], true, &["wrote"]);
        let c = std::fs::read_to_string(out.join("sentence_bert_config.json")).unwrap();
        serde_json::from_str::<serde_json::Value>(&c).unwrap()["max_seq_length"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(saved("", "keeps"), 100);
    assert_eq!(saved("--max-seq-length 64", "given"), 64);
}

#[test]
fn bad_input_handled_before_stays_handled() {
    let d = tempfile::tempdir().unwrap();
    let tiny = common::tiny_bert(d.path());
    let x = pairs(d.path());
    let out = d.path().join("e.parquet");
    let encode = |model: &Path, input: &Path, out: &Path, extra: &str| {
        format!(
            "encode --model {} --input {} --out {} {extra}",
            model.display(),
            input.display(),
            out.display()
        )
    };
    let refused = |input: &Path, extra: &str, says: &[&str]| {
        probe(
            &encode(&tiny, input, &out, extra),
            &[input, &tiny],
            false,
            says,
        );
    };
    let col = "--columns sentence1";
    refused(&d.path().join("missing.csv"), col, &["missing.csv"]);
    refused(&csv(d.path(), "empty.csv", &[]), col, &["empty.csv"]);
    let listed = ["'sentense1'", "sentence1, sentence2, label"];
    refused(&x, "--columns sentense1", &listed);
    let ragged = csv(
        d.path(),
        "ragged.csv",
        &["sentence1,sentence2", "a,b", "c,d,e,f"],
    );
    refused(&ragged, col, &["ragged.csv", "2"]);
    let null = d.path().join("null.jsonl");
    std::fs::write(&null, "{\"sentence1\": \"a\"}\n{\"sentence1\": null}\n").unwrap();
    refused(&null, col, &["null.jsonl", "row 2", "sentence1"]);
    let latin1 = d.path().join("latin1.csv");
    std::fs::write(&latin1, b"sentence1\ncaf\xe9\n").unwrap();
    refused(&latin1, col, &["latin1.csv"]);
    refused(&x, "--columns sentence1 --batch-size 0", &["--batch-size"]);
    // a broken model: weights cut short, or random bytes
    for (name, bytes) in [("cut", None), ("random", Some(vec![0x5au8; 4096]))] {
        let m = d.path().join(name);
        copy_dir(&tiny, &m);
        let w = m.join("model.safetensors");
        let b = bytes.unwrap_or_else(|| std::fs::read(&w).unwrap()[..1000].to_vec());
        std::fs::write(&w, b).unwrap();
        probe(
            &encode(&m, &x, &out, col),
            &[&m, &x],
            false,
            &["model.safetensors"],
        );
    }
    // an output that cannot be written (a file where its folder should be)
    let blocker = csv(d.path(), "blocker", &["x"]);
    let line = encode(&tiny, &x, &blocker.join("e.parquet"), col);
    probe(&line, &[&x, &blocker], false, &["blocker"]);
    // a failed run over an existing output keeps the old bytes
    probe(
        &encode(&tiny, &x, &out, col),
        &[&x],
        true,
        &["wrote 4 rows"],
    );
    let line = encode(&tiny, &x, &out, "--columns nope");
    probe(&line, &[&x, &out], false, &["'nope'"]);
}

/// A misspelt run-time setting stops the command before any work (issue 83): exit code 2, one
/// error naming the variable, the value and its valid values, no panic; before, CONDENSER_ISA and
/// CONDENSER_F32_GEMM panicked in a kernel, CONDENSER_ENGINE and CONDENSER_GPU_ENGINE ran on, and
/// CONDENSER_BLAS=bogus quietly loaded OpenBLAS as a "core type".
#[test]
fn a_misspelt_setting_is_one_error_naming_its_valid_values() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.txt");
    std::fs::write(&input, "a sentence\n").unwrap();
    let out = dir.path().join("out.parquet");
    let args = [
        "encode",
        "--model",
        "all-MiniLM-L6-v2",
        "--input",
        input.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    for (var, valid) in [
        ("CONDENSER_ISA", "baseline, avx2, avx512"),
        ("CONDENSER_ENGINE", "on (default), off"),
        ("CONDENSER_GPU_ENGINE", "on (default), off"),
        (
            "CONDENSER_BLAS",
            "auto (default; on and 1 too), off (or 0), env, mkl, openblas",
        ),
        ("CONDENSER_F32_GEMM", "auto (default), own, blas"),
        ("CONDENSER_BF16", "auto (default), mkl, own, avx512bf16"),
        ("CONDENSER_INDEX_CHECKPOINT_SECS", "whole seconds"),
    ] {
        let o = common::condenser_env(&[(var, "bogus")], &args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{var}: {err}");
        assert!(
            err.starts_with(&format!(
                "error: {var}=\"bogus\" is not a value it takes: {valid}"
            )),
            "{var}: {err}"
        );
        assert!(!err.contains("panicked") && !out.exists(), "{var}: {err}");
    }
    // a value in another case, or blank, is read as it is meant
    for (var, value) in [("CONDENSER_ISA", "AVX2"), ("CONDENSER_BLAS", " ")] {
        let o = common::condenser_env(&[(var, value)], &args);
        assert!(
            o.status.success(),
            "{var}={value:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}
