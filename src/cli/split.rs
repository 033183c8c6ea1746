use super::progress::out;
use crate::data::Io;
use crate::data::{split_file, split_retrieval, ColumnSpec, QueryParts};
use crate::error::{Error, Result};
use crate::flags::Seed;
use std::path::PathBuf;

#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["retrieval", "input"])))]
pub struct Args {
    /// A retrieval folder to split by query (BEIR or ours)
    #[arg(long)]
    retrieval: Option<PathBuf>,
    /// --retrieval: split the queries of this qrels split only (carve dev queries out of train)
    #[arg(long, requires = "retrieval")]
    split: Option<String>,
    /// --retrieval: queries that go to train (qrels/train); the rest go to test
    #[arg(long, requires = "retrieval", conflicts_with_all = ["test_fraction", "folds"])]
    train_queries: Option<usize>,
    /// --retrieval: k folds, each a folder OUT/fold-I whose test split is one fold and whose
    /// train split is the others (dev queries when there are few)
    #[arg(long, requires = "retrieval", conflicts_with = "test_fraction")]
    folds: Option<usize>,
    /// A dataset file (pairs) to split by row into OUT/train.parquet and OUT/test.parquet
    #[arg(long)]
    input: Option<PathBuf>,
    /// The share that goes to test, rounded to a whole row or query [default: 0.2]
    #[arg(long)]
    test_fraction: Option<f64>,
    /// Columns whose texts identify a row of --input (its hash key)
    #[arg(long, default_value = "sentence1,sentence2", requires = "input")]
    key_columns: ColumnSpec,
    // (the hash seed of the order: items by xxh3(key, seed), the first ones to train)
    #[command(flatten)]
    seed: Seed,
    /// Output folder: for --retrieval the queries and corpus files, qrels/train.parquet and
    /// qrels/test.parquet (in OUT/fold-I with --folds); for --input train.parquet and test.parquet
    #[arg(long)]
    out: PathBuf,
}

pub fn run(a: Args) -> Result<()> {
    let fraction = a.test_fraction.unwrap_or(0.2);
    if let Some(dir) = &a.retrieval {
        let how = match (a.train_queries, a.folds) {
            (Some(n), _) => QueryParts::Train(n),
            (None, Some(k)) => QueryParts::Folds(k),
            (None, None) if a.test_fraction.is_some() => QueryParts::TestFraction(fraction),
            (None, None) => {
                return Err(Error::msg(
                    "--retrieval: give --train-queries N, --test-fraction F or --folds K",
                ))
            }
        };
        let s = split_retrieval(dir, a.split.as_deref(), &a.out, how, a.seed.seed)?;
        for (folder, train, test) in s.parts {
            out(&format!(
                "{train} train queries, {test} test queries -> {}/qrels/{{train,test}}.parquet\n",
                folder.display()
            ));
        }
    }
    if let Some(input) = &a.input {
        let key = a.key_columns.resolve(input)?;
        let key: Vec<&str> = key.iter().map(String::as_str).collect();
        let s = split_file(input, &a.out, &key, fraction, a.seed.seed)?;
        out(&format!(
            "{} train rows, {} test rows -> {}/{{train,test}}.parquet\n",
            s.train_rows,
            s.test_rows,
            a.out.display()
        ));
    }
    Ok(())
}

impl Args {
    pub fn io(&self) -> Io {
        Io::new()
            .inputs("--retrieval", &self.retrieval)
            .inputs("--input", &self.input)
            .output("--out", &self.out)
    }
}
