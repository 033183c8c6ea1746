use super::out;
use condenser::data::split_retrieval;
use condenser::error::Result;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// A retrieval folder to split by query (BEIR or ours)
    #[arg(long)]
    retrieval: PathBuf,
    /// Queries that go to train (qrels/train); the rest go to test
    #[arg(long)]
    train_queries: usize,
    /// The hash seed of the order (queries by xxh3(id, seed), first ones to train)
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Output folder: the queries and corpus files, qrels/train.parquet, qrels/test.parquet
    #[arg(long)]
    out: PathBuf,
}

pub fn run(a: Args) -> Result<()> {
    let s = split_retrieval(&a.retrieval, &a.out, a.train_queries, a.seed)?;
    out(&format!(
        "{} train queries, {} test queries -> {}/qrels/{{train,test}}.parquet\n",
        s.train_queries,
        s.test_queries,
        a.out.display()
    ));
    Ok(())
}
