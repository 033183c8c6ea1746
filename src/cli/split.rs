use super::progress::out;
use condenser::data::{split_file, split_retrieval, ColumnSpec};
use condenser::error::Result;
use condenser::flags::Seed;
use std::path::PathBuf;

#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["retrieval", "input"])))]
pub struct Args {
    /// A retrieval folder to split by query (BEIR or ours)
    #[arg(long, requires = "train_queries")]
    retrieval: Option<PathBuf>,
    /// Queries that go to train (qrels/train); the rest go to test
    #[arg(long, requires = "retrieval")]
    train_queries: Option<usize>,
    /// A dataset file (pairs) to split by row into OUT/train.parquet and OUT/test.parquet
    #[arg(long)]
    input: Option<PathBuf>,
    /// The share of --input's rows that go to test (rounded to a whole row)
    #[arg(long, default_value_t = 0.2, requires = "input")]
    test_fraction: f64,
    /// Columns whose texts identify a row of --input (its hash key)
    #[arg(long, default_value = "sentence1,sentence2", requires = "input")]
    key_columns: ColumnSpec,
    // (the hash seed of the order: items by xxh3(key, seed), the first ones to train)
    #[command(flatten)]
    seed: Seed,
    /// Output folder: for --retrieval the queries and corpus files, qrels/train.parquet and
    /// qrels/test.parquet; for --input train.parquet and test.parquet
    #[arg(long)]
    out: PathBuf,
}

pub fn run(a: Args) -> Result<()> {
    if let (Some(dir), Some(n)) = (&a.retrieval, a.train_queries) {
        let s = split_retrieval(dir, &a.out, n, a.seed.seed)?;
        out(&format!(
            "{} train queries, {} test queries -> {}/qrels/{{train,test}}.parquet\n",
            s.train_queries,
            s.test_queries,
            a.out.display()
        ));
    }
    if let Some(input) = &a.input {
        let key: Vec<&str> = a.key_columns.0.iter().map(|c| c.name.as_str()).collect();
        let s = split_file(input, &a.out, &key, a.test_fraction, a.seed.seed)?;
        out(&format!(
            "{} train rows, {} test rows -> {}/{{train,test}}.parquet\n",
            s.train_rows,
            s.test_rows,
            a.out.display()
        ));
    }
    Ok(())
}
