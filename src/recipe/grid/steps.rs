//! The grid planned as recipe steps: the overlap, target samples, per source a cross-encoder and
//! a gold bi-encoder, per cell the labelled target pairs ((i) as they are, (ii) plus random
//! sampling) and a bi-encoder on each, per target one evaluation of every model. Flag names come
//! from `crate::flags`, the table the binary's parsers use too.
use super::{cell_name, Domain, Grid};
use crate::error::{Error, Result};
use crate::flags;
use crate::recipe::Step;
use std::path::{Path, PathBuf};

/// How the steps are planned: `Run` needs every domain file (the preparation ran); `Plan` (a dry
/// run) takes a missing file as one the preparation will write, and assumes a capped sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Planning {
    Run,
    Plan,
}

impl Grid {
    /// The pairs of `t` the cross-encoders label: its train split, or a seeded sample of it.
    fn target_pairs(&self, t: &Domain, p: Planning) -> Result<PathBuf> {
        Ok(if self.samples(t, p)? {
            self.out()
                .join("targets")
                .join(format!("{}.parquet", t.name))
        } else {
            t.train.clone()
        })
    }

    fn samples(&self, t: &Domain, p: Planning) -> Result<bool> {
        let cap = self.settings.target_pairs;
        if cap == 0 {
            return Ok(false);
        }
        if p == Planning::Plan && !t.train.is_file() {
            return Ok(true);
        }
        Ok(crate::data::count_rows(&t.train)? > cap)
    }

    /// The grid's steps. With `Planning::Run` every domain's files must exist (after the
    /// preparation steps ran).
    pub fn steps(&self, p: Planning) -> Result<Vec<Step>> {
        for d in &self.domains {
            for (what, f) in [
                ("train", &d.train),
                ("test", &d.test),
                ("dev", &d.dev().to_path_buf()),
            ] {
                if p == Planning::Run && !f.is_file() {
                    return Err(Error::file(
                        f,
                        format!("domain '{}' {what}: no such file", d.name),
                    ));
                }
            }
        }
        let g = &self.settings;
        let model = show(&g.model);
        let seed = g.seed.to_string();
        let batch = g.batch_size.to_string();
        let mut steps = Vec::new();
        let mut a = Args::default()
            .flag(flags::TOKENIZER, &model)
            .flag(flags::OUT, &show(&self.out().join("overlap")));
        for d in &self.domains {
            a = a.positional(format!("{}={}", d.name, show(&d.train)));
        }
        steps.push(a.step("overlap", "domain-overlap", vec![self.overlap_json()]));
        for t in &self.domains {
            if self.samples(t, p)? {
                let dest = self.target_pairs(t, p)?;
                let a = Args::default()
                    .positional(show(&t.train))
                    .positional(show(&dest))
                    .flag(flags::COLUMNS, "sentence1,sentence2")
                    .flag(flags::SAMPLE, &g.target_pairs.to_string())
                    .flag(flags::SEED, &seed);
                steps.push(a.step(&format!("sample-{}", t.name), "convert", vec![dest]));
            }
        }
        for s in &self.domains {
            let ce = self.cross_encoder(s);
            let a = Args::default()
                .flag(flags::MODEL, &model)
                .flag(flags::TRAIN, &show(&s.train))
                .flag(flags::DEV, &show(s.dev()))
                .switch(flags::BOTH_ORDERS)
                .flag(flags::EPOCHS, "1")
                .flag(flags::BATCH_SIZE, &batch)
                .flag(flags::LR, &s.lr.to_string())
                .flag(flags::WARMUP, &s.warmup.to_string())
                .flag(flags::SEED, &seed)
                .flag(flags::OUT, &show(&ce));
            steps.push(a.step(
                &format!("cross-encoder-{}", s.name),
                "train-cross-encoder",
                vec![ce.join("model.safetensors"), ce.join("train_log.csv")],
            ));
            let gold = format!("gold-{}", s.name);
            steps.push(biencoder(
                &gold,
                &model,
                &s.train,
                &self.gold_biencoder(s),
                &batch,
                &seed,
            ));
            for t in &self.domains {
                for augmented in [false, true] {
                    let silver = self.silver_pairs(s, t, augmented);
                    let mut a = Args::default()
                        .flag(flags::CROSS_ENCODER, &show(&ce))
                        .flag(flags::INPUT, &show(&self.target_pairs(t, p)?))
                        .flag(flags::COLUMNS, "sentence1,sentence2")
                        .switch(flags::UNLABELED)
                        .flag(flags::SEED, &seed)
                        .flag(flags::OUT, &show(&silver));
                    a = if augmented {
                        a.flag(flags::SAMPLE, "random")
                            .flag(flags::TOP_K, &g.top_k.to_string())
                    } else {
                        a.flag(flags::SAMPLE, "none")
                    };
                    let name = cell_name(s, t, augmented);
                    steps.push(a.step(&format!("label-{name}"), "augment", vec![silver.clone()]));
                    let out = self.silver_biencoder(s, t, augmented);
                    steps.push(biencoder(&name, &model, &silver, &out, &batch, &seed));
                }
            }
        }
        for t in &self.domains {
            let dir = self.eval_dir(t);
            let mut a = Args::default().flag(flags::MODEL, &model);
            for m in self.models_on(t) {
                a = a.flag(flags::MODEL, &show(&m));
            }
            let a = a
                .flag(t.task.flag(), &format!("{}={}", t.name, show(&t.test)))
                .flag(flags::OUT, &show(&dir));
            steps.push(a.step(
                &format!("evaluate-{}", t.name),
                "evaluate",
                vec![dir.join("results.json")],
            ));
        }
        Ok(steps)
    }

    /// The trained models scored on target `t`: every gold bi-encoder, then each source's (i)
    /// and (ii) bi-encoders for `t`.
    fn models_on(&self, t: &Domain) -> Vec<PathBuf> {
        let mut m: Vec<PathBuf> = self
            .domains
            .iter()
            .map(|s| self.gold_biencoder(s))
            .collect();
        for s in &self.domains {
            m.push(self.silver_biencoder(s, t, false));
            m.push(self.silver_biencoder(s, t, true));
        }
        m
    }
}

/// A bi-encoder from `model` with the cosine loss, 1 epoch, on labelled pairs.
fn biencoder(name: &str, model: &str, train: &Path, out: &Path, batch: &str, seed: &str) -> Step {
    Args::default()
        .flag(flags::INIT, model)
        .flag(flags::TRAIN, &show(train))
        .flag(flags::LOSS, "cosine")
        .flag(flags::EPOCHS, "1")
        .flag(flags::BATCH_SIZE, batch)
        .flag(flags::SEED, seed)
        .flag(flags::OUT, &show(out))
        .step(
            &format!("bi-encoder-{name}"),
            "train-biencoder",
            vec![out.join("model.safetensors"), out.join("train_log.csv")],
        )
}

fn show(p: &Path) -> String {
    p.display().to_string()
}

/// A subcommand's argv, built flag by flag.
#[derive(Default)]
struct Args(Vec<String>);

impl Args {
    fn flag(mut self, name: &str, value: &str) -> Args {
        self.0.push(format!("--{name}"));
        self.0.push(value.to_string());
        self
    }
    fn switch(mut self, name: &str) -> Args {
        self.0.push(format!("--{name}"));
        self
    }
    fn positional(mut self, value: String) -> Args {
        self.0.push(value);
        self
    }
    /// The step; its --out (as a recipe's) is where it writes, never one of its inputs.
    fn step(self, name: &str, command: &str, outputs: Vec<PathBuf>) -> Step {
        let out = self
            .0
            .iter()
            .position(|a| a == &format!("--{}", flags::OUT))
            .and_then(|i| self.0.get(i + 1))
            .map(PathBuf::from);
        Step {
            name: name.to_string(),
            command: command.to_string(),
            args: self.0,
            outputs,
            out,
        }
    }
}
