//! Sharded runs: for encode, augment (labelling), mine and domain-overlap (exact and MinHash),
//! N = 1, 3 and 4 shards run as separate processes and `merge`d equal the single run (the same
//! rows and values; an identical overlap.json), and a missing or mismatched shard is a clear error.
mod common;
use common::{condenser, cross_encoder, data, tiny_bert};
use std::path::{Path, PathBuf};

fn ok(args: &[&str]) -> String {
    let o = condenser(args);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "condenser {}: {text}", args.join(" "));
    text
}

fn fails(args: &[&str]) -> String {
    let o = condenser(args);
    assert!(
        !o.status.success(),
        "condenser {} should fail",
        args.join(" ")
    );
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Every row of a Parquet file, as one batch.
fn table(p: &Path) -> arrow_array::RecordBatch {
    let f = std::fs::File::open(p).unwrap();
    let r = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(f)
        .unwrap()
        .build()
        .unwrap();
    let batches: Vec<_> = r.map(|b| b.unwrap()).collect();
    arrow_select::concat::concat_batches(&batches[0].schema(), &batches).unwrap()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Run `args` + `--out OUT` whole into `dir/single.EXT`, then for N = 1, 3, 4 as N processes
/// into `dir/nN/sharded.EXT` and merge; each merge must equal the single run by `same`.
fn check_shards(dir: &Path, args: &[&str], ext: &str, same: impl Fn(&Path, &Path)) -> PathBuf {
    let single = dir.join(format!("single{ext}"));
    ok(&[args, &["--out", s(&single)]].concat());
    let mut last = PathBuf::new();
    for n in [1, 3, 4] {
        let sub = dir.join(format!("n{n}"));
        std::fs::create_dir_all(&sub).unwrap();
        let out = sub.join(format!("sharded{ext}"));
        for i in 0..n {
            let shard = format!("{i}/{n}");
            ok(&[args, &["--out", s(&out), "--shard", &shard]].concat());
        }
        let merged = ok(&["merge", s(&out)]);
        assert!(merged.contains(&format!("merged {n} shards")), "{merged}");
        same(&single, &out);
        last = out;
    }
    last
}

fn same_table(a: &Path, b: &Path) {
    let (x, y) = (table(a), table(b));
    assert_eq!(x.num_rows(), y.num_rows());
    assert_eq!(x, y, "{} and {} differ", a.display(), b.display());
}

#[test]
fn sharded_encode_merges_to_the_single_run() {
    let dir = tempfile::tempdir().unwrap();
    let tiny = tiny_bert(dir.path());
    // 5,749 rows: six blocks of 1,024, dealt to 1, 3 and 4 shards
    let input = data("stsb/train.parquet");
    let args = [
        "encode",
        "--model",
        s(&tiny),
        "--input",
        s(&input),
        "--columns",
        "sentence1,sentence2",
        "--batch-size",
        "16",
    ];
    let sharded = check_shards(dir.path(), &args, ".parquet", same_table);
    assert_eq!(table(&sharded).num_rows(), 5749);

    // a missing shard is named; a shard made with other settings is refused
    let n4 = dir.path().join("n4");
    let gone = n4.join("sharded.shard-00002-of-00004.json");
    std::fs::rename(&gone, n4.join("aside.json")).unwrap();
    let e = fails(&["merge", s(&sharded)]);
    assert!(
        e.contains("shard 2/4")
            && e.contains("is missing")
            && e.contains("sharded.shard-00002-of-00004.json"),
        "{e}"
    );
    std::fs::rename(n4.join("aside.json"), &gone).unwrap();
    ok(&[
        &args[..7],
        &["--batch-size", "8", "--out", s(&sharded), "--shard", "2/4"],
    ]
    .concat());
    let e = fails(&["merge", s(&sharded)]);
    assert!(
        e.contains("other settings") && e.contains("batch_size=8"),
        "{e}"
    );
    // a stale shard of another N is refused, not silently merged
    ok(&[&args[..], &["--out", s(&sharded), "--shard", "2/4"]].concat());
    ok(&[&args[..], &["--out", s(&sharded), "--shard", "1/3"]].concat());
    let e = fails(&["merge", s(&sharded)]);
    assert!(e.contains("N = 3") && e.contains("stale"), "{e}");
    // no shards at all
    let e = fails(&["merge", s(&dir.path().join("nothing.parquet"))]);
    assert!(e.contains("no shards found"), "{e}");
}

/// `augment` labelling `input`'s pairs with the cross-encoder `ce`.
fn labelling<'a>(ce: &'a Path, input: &'a Path) -> [&'a str; 5] {
    ["augment", "--cross-encoder", s(ce), "--input", s(input)]
}

#[test]
fn sharded_labelling_merges_to_the_single_run() {
    let dir = tempfile::tempdir().unwrap();
    let ce = cross_encoder(dir.path());
    // 1,500 target pairs + 1,500 sampled: three blocks of pairs
    let input = data("stsb/dev.parquet");
    let more = [
        "--unlabeled",
        "--sample",
        "random",
        "--top-k",
        "1",
        "--seed",
        "5",
    ];
    let args = [&labelling(&ce, &input)[..], &more].concat();
    let out = check_shards(dir.path(), &args, ".parquet", same_table);
    // every target pair, and a sampled partner for nearly every sentence (repeats are dropped)
    let t = table(&out);
    assert!(
        t.num_rows() > 2900 && t.num_rows() <= 3000,
        "{}",
        t.num_rows()
    );
}

/// `mine` of `input`'s (sentence1, sentence2) pairs: the bi-encoder's candidates rescored by the
/// cross-encoder, two random negatives of the top 12 (seeded per anchor).
fn mine_args<'a>(tiny: &'a Path, ce: &'a Path, input: &'a Path) -> Vec<&'a str> {
    vec![
        "mine",
        "--model",
        s(tiny),
        "--cross-encoder",
        s(ce),
        "--input",
        s(input),
        "--columns",
        "sentence1,sentence2",
        "--num-negatives",
        "2",
        "--range-max",
        "12",
        "--sampling",
        "random",
    ]
}

#[test]
fn sharded_mining_merges_to_the_single_run() {
    let dir = tempfile::tempdir().unwrap();
    let ce = cross_encoder(dir.path());
    let tiny = dir.path().join("tiny");
    // 1,379 STSb test pairs as (anchor, positive): 22 blocks of 64 anchors; bi-encoder candidates,
    // cross-encoder rescoring and a score filter, random picks (seeded per anchor)
    let input = data("stsb/test.parquet");
    let args = [mine_args(&tiny, &ce, &input), vec!["--max-score", "0.9999"]].concat();
    check_shards(dir.path(), &args, ".parquet", same_table);
}

#[test]
fn sharded_overlap_merges_to_the_single_run() {
    let dir = tempfile::tempdir().unwrap();
    let (stsb, mrpc) = (data("stsb/train.parquet"), data("mrpc/train.parquet"));
    let (a, b) = (format!("stsb={}", s(&stsb)), format!("mrpc={}", s(&mrpc)));
    for (name, extra) in [("exact", vec![]), ("minhash", vec!["--approx", "256"])] {
        let sub = dir.path().join(name);
        let args: Vec<&str> = [&["domain-overlap"][..], &extra, &[a.as_str(), b.as_str()]].concat();
        let same = |x: &Path, y: &Path| {
            let (x, y) = (x.join("overlap.json"), y.join("overlap.json"));
            assert_eq!(
                std::fs::read_to_string(&x).unwrap(),
                std::fs::read_to_string(&y).unwrap()
            );
        };
        check_shards(&sub, &args, "", same);
        let report = std::fs::read_to_string(sub.join("n4/sharded/overlap.json")).unwrap();
        assert!(
            report.contains(if name == "exact" {
                "\"exact\""
            } else {
                "\"minhash\""
            }),
            "{report}"
        );
    }
}

/// The parts (`part-*` files) in `out`'s parts folder.
fn parts_of(out: &Path) -> usize {
    let mut name = out.file_name().unwrap().to_os_string();
    name.push(".partial");
    std::fs::read_dir(out.with_file_name(name)).map_or(0, |d| {
        d.filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().starts_with("part-"))
        })
        .count()
    })
}

/// Run `args` + `--out` whole, then again SIGKILLed once two blocks are kept as parts: `other`
/// (flags that change a setting) is refused naming `diff`, and leaves the parts; the same flags
/// again say `resumed` and write the whole run's table, and nothing is left beside it. Returns the
/// killed run's output (for further checks) and its parts when killed.
fn check_resume(
    dir: &Path,
    args: &[&str],
    other: &[&str],
    diff: &str,
    resumed: &str,
) -> (PathBuf, usize) {
    let (whole, killed) = (dir.join("whole.parquet"), dir.join("killed.parquet"));
    ok(&[args, &["--out", s(&whole)]].concat());
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_condenser"));
    cmd.args([args, &["--out", s(&killed)]].concat());
    common::kill_when(cmd, || parts_of(&killed) >= 2);
    let kept = parts_of(&killed);
    assert!(!killed.exists() && kept >= 2);
    let e = fails(&[args, other, &["--out", s(&killed)]].concat());
    assert!(
        e.contains("killed.parquet.partial")
            && e.contains("interrupted run with other settings")
            && e.contains(diff),
        "{e}"
    );
    assert_eq!(parts_of(&killed), kept, "a refused run leaves the parts");
    let text = ok(&[args, &["--out", s(&killed)]].concat());
    assert!(
        text.contains("resuming: ") && text.contains(resumed),
        "{text}"
    );
    same_table(&whole, &killed);
    let left: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("whole") || n.contains("killed"))
        .collect();
    assert_eq!(
        left.len(),
        2,
        "the parts folder goes once the file is whole: {left:?}"
    );
    (killed, kept)
}

/// An encode killed after some blocks (SIGKILL) resumes from the parts it left beside its output
/// and writes the uninterrupted run's bits; other settings or another input are refused.
#[test]
fn an_interrupted_encode_resumes_to_the_whole_runs_bits() {
    let dir = tempfile::tempdir().unwrap();
    let model = common::model();
    // 5,749 rows: six blocks of 1,024 through the real model
    let train = data("stsb/train.parquet");
    let args = [
        "encode",
        "--model",
        s(&model),
        "--input",
        s(&train),
        "--columns",
        "sentence1",
    ];
    let (killed, _) = check_resume(
        dir.path(),
        &args,
        &["--batch-size", "16"],
        "batch_size=32 (that run) vs batch_size=16 (this one)",
        "wrote 5749 rows",
    );
    // a changed input is another run's: killed again, then run on the dev split
    std::fs::remove_file(&killed).unwrap();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_condenser"));
    cmd.args([&args[..], &["--out", s(&killed)]].concat());
    common::kill_when(cmd, || parts_of(&killed) >= 1);
    let dev = data("stsb/dev.parquet");
    let e = fails(
        &[
            &args[..4],
            &[s(&dev), "--columns", "sentence1", "--out", s(&killed)],
        ]
        .concat(),
    );
    assert!(e.contains("input_xxh3="), "{e}");
}

/// Labelling killed after some chunks resumes to the whole run's pairs and labels.
#[test]
fn interrupted_labelling_resumes_to_the_whole_runs_labels() {
    let dir = tempfile::tempdir().unwrap();
    let ce = cross_encoder(dir.path());
    // 5,749 gold pairs + ~16,000 sampled to label: 22 chunks of 1,024
    let input = data("stsb/train.parquet");
    let args = [&labelling(&ce, &input)[..], &["--top-k", "3"]].concat();
    check_resume(
        dir.path(),
        &args,
        &["--seed", "7"],
        "seed=42 (that run) vs seed=7 (this one)",
        "labelled) were written by an interrupted run",
    );
}

/// Mining killed after some blocks of anchors resumes to the whole run's rows.
#[test]
fn interrupted_mining_resumes_to_the_whole_runs_rows() {
    let dir = tempfile::tempdir().unwrap();
    let ce = cross_encoder(dir.path());
    let tiny = dir.path().join("tiny");
    // STSb train as (anchor, positive): 90 blocks of 64 anchors, rescored by the cross-encoder
    let input = data("stsb/train.parquet");
    let args = mine_args(&tiny, &ce, &input);
    check_resume(
        dir.path(),
        &args,
        &["--seed", "7"],
        "options.seed=42 (that run) vs options.seed=7 (this one)",
        "anchors were mined by an interrupted run",
    );
}
