use super::progress::out;
use crate::data::{write_atomic, Io};
use crate::error::{Context, Error, Result};
use crate::flags;
use crate::study::loco::{read_all, Loco};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// A development collection's retrieval-adaptation run, NAME=DIR (DIR holds report/report.json
    /// and report/test/, written by the recipe with every candidate named in `also`); at least 3
    /// collections. A collection's splits are NAME/SPLIT=DIR (cranfield/s0, cranfield/s1: the
    /// recipe's split_seed 0 and 1), left out together
    #[arg(long = "collection", required = true, value_parser = parse_named)]
    collections: Vec<(String, PathBuf)>,
    /// The methods a user with no labels can run (their dev models saw no judged query)
    #[arg(long, value_delimiter = ',', default_value = "p,pw")]
    label_free: Vec<String>,
    /// The methods trained on the judged train queries (their dev models on folds)
    #[arg(long, value_delimiter = ',', default_value = "b,bw,pb")]
    labels: Vec<String>,
    /// The metric the runs chose by
    #[arg(long, default_value = "cosine_ndcg@10")]
    metric: String,
    /// Folder for loco.md and loco.json
    #[arg(long = flags::OUT)]
    out: PathBuf,
}

fn parse_named(s: &str) -> std::result::Result<(String, PathBuf), String> {
    match s.split_once('=') {
        Some((n, d)) if !n.is_empty() && !d.is_empty() => Ok((n.to_string(), d.into())),
        _ => Err(format!("'{s}': expected NAME=DIR")),
    }
}

pub fn run(a: Args) -> Result<()> {
    if let Some(m) = a.label_free.iter().find(|m| a.labels.contains(m)) {
        return Err(Error::msg(format!(
            "{m} is named both --label-free and --labels"
        )));
    }
    let cs = read_all(&a.collections, &a.metric)?;
    let loco = Loco::run(&cs, &a.label_free, &a.labels)?;
    std::fs::create_dir_all(&a.out).map_err(|e| Error::file(&a.out, e))?;
    let md = loco.markdown();
    write_atomic(&a.out.join("loco.md"), md.as_bytes())?;
    let json = serde_json::to_string_pretty(&loco).doing("serialising the study")?;
    write_atomic(&a.out.join("loco.json"), json.as_bytes())?;
    out(&format!(
        "{md}\nwrote {}/loco.{{md,json}}\n",
        a.out.display()
    ));
    Ok(())
}

impl Args {
    pub fn io(&self) -> Io {
        let dirs: Vec<PathBuf> = self.collections.iter().map(|c| c.1.clone()).collect();
        let io = dirs
            .iter()
            .fold(Io::new(), |io, d| io.root("--collection", d));
        io.output("--out", &self.out)
    }
}
