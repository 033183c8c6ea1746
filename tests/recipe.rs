//! `condenser run`: steps run in order with variables substituted, finished steps are skipped on a
//! re-run, changed arguments re-run a step, an interrupted training step resumes from its
//! checkpoint, and a failing step names itself.
mod common;
use std::path::Path;
use std::process::{Command, Output};

fn run(recipe: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_condenser"))
        .arg("run")
        .arg(recipe)
        .args(extra)
        .output()
        .unwrap()
}

/// One `[[step]]` table: positional arguments, `args` as TOML (without braces), outputs.
fn step(name: &str, command: &str, positional: &[&str], args: &str, outputs: &[&str]) -> String {
    let list = |v: &[&str]| {
        v.iter()
            .map(|x| format!("\"{x}\""))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "\n[[step]]\nname = \"{name}\"\ncommand = \"{command}\"\npositional = [{}]\nargs = {{ {args} }}\noutputs = [{}]\n",
        list(positional),
        list(outputs)
    )
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn recipe_runs_skips_and_resumes() {
    let d = tempfile::tempdir().unwrap();
    let tiny = common::tiny_bert(d.path());
    let out = d.path().join("out");
    let recipe = d.path().join("r.toml");
    let tiny = tiny.display().to_string();
    let recipe_text = format!(
        "[vars]\nout = \"{}\"\ndata = \"{}\"\nn = \"40\"\ntrain = \"{{out}}/small.parquet\"\n",
        out.display(),
        common::data("stsb/train.parquet").display()
    ) + &step("small", "convert", &["{data}", "{train}"], "sample = \"{n}\", seed = 3", &["{train}"])
        + &step(
            "bi",
            "train-biencoder",
            &[],
            &format!("init = \"{tiny}\", train = \"{{train}}\", loss = \"cosine\", out = \"{{out}}/bi\", batch-size = 8, checkpoint-steps = 2, max-seq-length = 32"),
            &["{out}/bi/model.safetensors"],
        );
    std::fs::write(&recipe, recipe_text).unwrap();
    let o = run(&recipe, &[]);
    assert!(o.status.success(), "{}", text(&o));
    let small =
        condenser::data::Pairs::read(&out.join("small.parquet"), &Default::default()).unwrap();
    assert_eq!(small.len(), 40);
    assert!(out.join("bi/modules.json").is_file());
    // a re-run skips both steps
    let o = run(&recipe, &[]);
    assert!(o.status.success());
    assert_eq!(text(&o).matches("done, skipped").count(), 2, "{}", text(&o));
    // a changed variable re-runs the steps it reaches
    let o = run(&recipe, &["--set", "n=24", "--dry-run"]);
    assert!(
        !text(&o).contains("small: done") && text(&o).contains("--sample 24"),
        "{}",
        text(&o)
    );
    // a training step killed mid-way (state 'running', a checkpoint on disk) continues with
    // --resume; so does one killed after it finished (its card and log there, its checkpoint
    // removed), which --resume then reports done
    let state = out.join("recipe_state.json");
    let mut s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
    s["steps"]["bi"]["status"] = "running".into();
    std::fs::write(&state, s.to_string()).unwrap();
    let o = run(&recipe, &["--dry-run"]);
    let t = text(&o);
    assert!(
        t.contains("train-biencoder") && t.contains("--resume"),
        "{t}"
    );
    assert!(!t.contains("--sample 40 --seed 3 --resume"), "{t}");
    assert!(t.contains("small: done, skipped"), "{t}");
}

/// Which steps of a run ran ("runs") and which were skipped, by name.
fn ran(t: &str) -> Vec<String> {
    t.lines()
        .filter(|l| l.contains(": runs ("))
        .filter_map(|l| l.split("] ").nth(1)?.split(':').next().map(String::from))
        .collect()
}

/// Input tracking: a step re-runs when a file it reads changed, upstream outputs included; a
/// changed upstream variable re-runs exactly the steps downstream of it.
#[test]
fn a_changed_input_reruns_every_dependent_step_and_no_other() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("out");
    let recipe = d.path().join("r.toml");
    let (stsb, mrpc) = (
        common::data("stsb/train.parquet").display().to_string(),
        common::data("mrpc/train.parquet").display().to_string(),
    );
    let recipe_text = format!("[vars]\nout = \"{}\"\nn = \"40\"\n", out.display())
        + &step(
            "gold",
            "convert",
            &[&stsb, "{out}/gold.parquet"],
            "sample = \"{n}\", seed = 3",
            &["{out}/gold.parquet"],
        )
        + &step(
            "texts",
            "convert",
            &["{out}/gold.parquet", "{out}/texts.parquet"],
            "columns = \"sentence1\"",
            &["{out}/texts.parquet"],
        )
        + &step(
            "few",
            "convert",
            &["{out}/texts.parquet", "{out}/few.parquet"],
            "sample = 5",
            &["{out}/few.parquet"],
        )
        + &step(
            "other",
            "convert",
            &[&mrpc, "{out}/other.parquet"],
            "sample = 10",
            &["{out}/other.parquet"],
        );
    std::fs::write(&recipe, recipe_text).unwrap();
    let o = run(&recipe, &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(ran(&text(&o)), ["gold", "texts", "few", "other"]);
    let o = run(&recipe, &[]);
    assert!(ran(&text(&o)).is_empty(), "{}", text(&o));
    // an upstream variable: gold re-draws, and everything reading it (directly or not) follows
    for dry in [true, false] {
        let args: &[&str] = if dry {
            &["--set", "n=30", "--dry-run"]
        } else {
            &["--set", "n=30"]
        };
        let o = run(&recipe, args);
        assert!(o.status.success(), "{}", text(&o));
        assert_eq!(ran(&text(&o)), ["gold", "texts", "few"], "{}", text(&o));
    }
    let texts = out.join("texts.parquet");
    assert_eq!(
        condenser::data::read_texts(&texts, "sentence1", None)
            .unwrap()
            .len(),
        30
    );
    // a file changed outside the recipe: the steps reading it re-run, the one making it does not
    let o = run(&recipe, &["--set", "n=30"]);
    assert!(ran(&text(&o)).is_empty(), "{}", text(&o));
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::copy(out.join("other.parquet"), &texts).unwrap();
    let o = run(&recipe, &["--set", "n=30", "--dry-run"]);
    assert_eq!(ran(&text(&o)), ["few"], "{}", text(&o));
    // the same bytes written again (a data folder copied anew): no change, nothing re-runs
    let o = run(&recipe, &["--set", "n=30"]);
    assert_eq!(ran(&text(&o)), ["few"], "{}", text(&o));
    std::thread::sleep(std::time::Duration::from_millis(20));
    let bytes = std::fs::read(&texts).unwrap();
    std::fs::write(&texts, bytes).unwrap();
    let o = run(&recipe, &["--set", "n=30", "--dry-run"]);
    assert!(ran(&text(&o)).is_empty(), "{}", text(&o));
}

#[test]
fn a_failing_step_names_itself_and_bad_recipes_are_clear() {
    let d = tempfile::tempdir().unwrap();
    let recipe = d.path().join("r.toml");
    // the state goes to {out}: inside the temporary folder, not the working directory
    let out = d.path().join("x");
    std::fs::write(&recipe, format!("[vars]\nout = \"{}\"\n[[step]]\nname = \"broken\"\ncommand = \"convert\"\npositional = [\"/nonexistent.parquet\", \"{{out}}/y.parquet\"]\n", out.display())).unwrap();
    let o = run(&recipe, &[]);
    let t = text(&o);
    assert!(
        !o.status.success()
            && t.contains("step 'broken' failed")
            && t.contains("/nonexistent.parquet"),
        "{t}"
    );
    assert!(out.join("recipe_state.json").is_file());
    std::fs::write(
        &recipe,
        "[[step]]\nname = \"s\"\ncommand = \"convert\"\npositional = [\"{nope}\"]\n",
    )
    .unwrap();
    let t = text(&run(&recipe, &[]));
    assert!(
        t.contains("unknown variable {nope}") && t.contains("r.toml"),
        "{t}"
    );
}

#[test]
fn every_shipped_recipe_plans() {
    let dir = common::root().join("recipes");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "toml") {
            // a grid file plans all its steps (preparation and grid) through its own command
            let grid = std::fs::read_to_string(&p).unwrap().contains("\n[grid]");
            let o = if grid {
                Command::new(env!("CARGO_BIN_EXE_condenser"))
                    .args(["transfer-grid", p.to_str().unwrap(), "--dry-run"])
                    .output()
                    .unwrap()
            } else {
                run(&p, &["--dry-run"])
            };
            let t = text(&o);
            assert!(o.status.success(), "{}: {t}", p.display());
            assert!(t.contains("[1/"), "{}: {t}", p.display());
            if grid {
                // every grid step's flags parsed: the last evaluation is planned
                assert!(
                    t.contains("evaluate-") && !t.contains("planned once"),
                    "{t}"
                );
            }
            n += 1;
        }
    }
    assert!(n >= 4, "{n} recipes");
    // a misspelt flag is caught by the plan, not hours into a run
    let d = tempfile::tempdir().unwrap();
    let bad = d.path().join("bad.toml");
    std::fs::write(
        &bad,
        "[[step]]\nname = \"enc\"\ncommand = \"encode\"\nargs = { modle = \"m\" }\noutputs = []\n",
    )
    .unwrap();
    let o = run(&bad, &["--dry-run"]);
    assert!(!o.status.success());
    let t = text(&o);
    assert!(t.contains("step 'enc'") && t.contains("--modle"), "{t}");
}

#[test]
fn for_each_repeats_a_step_per_value_and_expands_list_items() {
    let d = tempfile::tempdir().unwrap();
    let file = d.path().join("seeds.toml");
    std::fs::write(
        &file,
        r#"
[vars]
out = "o"
seeds = "1 2,3"
[[step]]
name = "train"
command = "split"
for_each = { seed = "{seeds}" }
args = { seed = "{seed}", out = "{out}/m-s{seed}" }
[[step]]
name = "evaluate"
command = "evaluate"
args = { model = ["base", { for_each = { seed = "{seeds}" }, value = "{out}/m-s{seed}" }], out = "{out}/eval" }
"#,
    )
    .unwrap();
    let r = condenser::recipe::Recipe::load(&file, &[]).unwrap();
    let names: Vec<&str> = r.steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "train[seed=1]",
            "train[seed=2]",
            "train[seed=3]",
            "evaluate"
        ]
    );
    // arguments in name order (TOML tables are sorted)
    assert_eq!(r.steps[1].args, ["--out", "o/m-s2", "--seed", "2"]);
    assert_eq!(r.steps[1].out.as_deref(), Some(Path::new("o/m-s2")));
    assert_eq!(
        r.steps[3].args,
        [
            "--model", "base", "--model", "o/m-s1", "--model", "o/m-s2", "--model", "o/m-s3",
            "--out", "o/eval"
        ]
    );
    // --set overrides the list; a for_each without values is an error naming the step
    let r = condenser::recipe::Recipe::load(&file, &[("seeds".into(), "7".into())]).unwrap();
    assert_eq!(r.steps.len(), 2);
    let e = condenser::recipe::Recipe::load(&file, &[("seeds".into(), " ".into())])
        .unwrap_err()
        .to_string();
    assert!(e.contains("step 'train'") && e.contains("no values"), "{e}");
}

/// Several for_each variables give every combination (folds x seeds), in the variables' name order,
/// each step named by all of its bindings.
#[test]
fn for_each_over_two_variables_gives_every_combination() {
    let d = tempfile::tempdir().unwrap();
    let file = d.path().join("folds.toml");
    std::fs::write(
        &file,
        r#"
[vars]
folds = "0 1"
[[step]]
name = "b"
command = "split"
for_each = { seed = "1 2", fold = "{folds}" }
args = { seed = "{seed}", out = "o/b-f{fold}-s{seed}" }
[[step]]
name = "evaluate"
command = "evaluate"
args = { model = [{ for_each = { fold = "{folds}", seed = "1 2" }, value = "o/b-f{fold}-s{seed}" }], out = "o/eval" }
"#,
    )
    .unwrap();
    let r = condenser::recipe::Recipe::load(&file, &[]).unwrap();
    let names: Vec<&str> = r.steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "b[fold=0,seed=1]",
            "b[fold=0,seed=2]",
            "b[fold=1,seed=1]",
            "b[fold=1,seed=2]",
            "evaluate"
        ]
    );
    assert_eq!(r.steps[2].args, ["--out", "o/b-f1-s1", "--seed", "1"]);
    let models: Vec<&str> = (r.steps[4].args.iter())
        .skip(1)
        .step_by(2)
        .take(4)
        .map(|s| s.as_str())
        .collect();
    assert_eq!(models, ["o/b-f0-s1", "o/b-f0-s2", "o/b-f1-s1", "o/b-f1-s2"]);
}

#[test]
fn when_keeps_or_leaves_out_steps_and_list_items_by_a_variable() {
    let d = tempfile::tempdir().unwrap();
    let file = d.path().join("when.toml");
    std::fs::write(
        &file,
        r#"
[vars]
out = "o"
extra = "false"
[[step]]
name = "base"
command = "split"
args = { out = "{out}/base" }
[[step]]
name = "optional"
when = "{extra}"
command = "split"
args = { out = "{out}/opt" }
[[step]]
name = "evaluate"
command = "evaluate"
args = { model = ["{out}/base", { for_each = { s = "1" }, value = "{out}/opt", when = "{extra}" }], out = "{out}/eval" }
"#,
    )
    .unwrap();
    let load = |v: &str| condenser::recipe::Recipe::load(&file, &[("extra".into(), v.into())]);
    let off = load("false").unwrap();
    let names: Vec<&str> = off.steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["base", "evaluate"]);
    assert_eq!(off.steps[1].args, ["--model", "o/base", "--out", "o/eval"]);
    let on = load("true").unwrap();
    assert_eq!(on.steps.len(), 3);
    assert_eq!(
        on.steps[2].args,
        ["--model", "o/base", "--model", "o/opt", "--out", "o/eval"]
    );
    // anything but true/false is refused, naming the step
    let e = load("yes").unwrap_err().to_string();
    assert!(
        e.contains("step 'optional'") && e.contains("expected true or false"),
        "{e}"
    );
}

/// A recipe's encode step killed mid-way resumes from its parts when the recipe runs again; run
/// with changed arguments, it replaces the stale parts (the step's own output) with a note
/// instead of stopping on them, and writes what the command writes alone.
#[test]
fn an_interrupted_encode_step_resumes_and_changed_arguments_replace_its_parts() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let recipe = dir.path().join("r.toml");
    let model = common::model();
    let train = common::data("stsb/train.parquet");
    let emb = out.join("emb.parquet");
    std::fs::write(
        &recipe,
        format!("[vars]\nout = \"{}\"\nbatch = \"32\"\n", out.display())
            + &step(
                "enc",
                "encode",
                &[],
                &format!(
                    "model = \"{}\", input = \"{}\", columns = \"sentence1\", batch-size = \"{{batch}}\", out = \"{{out}}/emb.parquet\"",
                    model.display(),
                    train.display()
                ),
                &["{out}/emb.parquet"],
            ),
    )
    .unwrap();
    let parts = out.join("emb.parquet.partial");
    let count = || {
        std::fs::read_dir(&parts).map_or(0, |d| {
            d.filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| e.file_name().to_string_lossy().starts_with("part-"))
            })
            .count()
        })
    };
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_condenser"));
    cmd.arg("run").arg(&recipe);
    common::kill_when(cmd, || count() >= 1);
    let t = text(&run(&recipe, &[]));
    assert!(
        t.contains("resuming: ") && t.contains("wrote 5749 rows"),
        "{t}"
    );
    assert!(!parts.exists());
    // killed again, then changed: the parts made with batch 32 are replaced, not refused
    std::fs::remove_file(&emb).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_condenser"));
    cmd.arg("run").arg(&recipe).args(["--force"]);
    common::kill_when(cmd, || count() >= 1);
    let o = run(&recipe, &["--set", "batch=16"]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(
        t.contains("note: removed") && t.contains("batch_size=32 (that run) vs batch_size=16"),
        "{t}"
    );
    let alone = dir.path().join("alone.parquet");
    let a = [
        "encode",
        "--model",
        model.to_str().unwrap(),
        "--input",
        train.to_str().unwrap(),
        "--columns",
        "sentence1",
        "--batch-size",
        "16",
        "--out",
        alone.to_str().unwrap(),
    ];
    common::ok(common::condenser(&a));
    let read = |p: &Path| {
        let f = std::fs::File::open(p).unwrap();
        let r = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(f)
            .unwrap()
            .build()
            .unwrap();
        r.map(|b| b.unwrap()).collect::<Vec<_>>()
    };
    let (x, y) = (read(&emb), read(&alone));
    let cat = |v: &[arrow_array::RecordBatch]| {
        arrow_select::concat::concat_batches(&v[0].schema(), v).unwrap()
    };
    assert_eq!(cat(&x), cat(&y));
}
