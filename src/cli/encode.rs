use super::model_opts::ModelOpts;
use super::{out, progress};
use condenser::data::ColumnSpec;
use condenser::encode::encode_file;
use condenser::error::Result;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    #[arg(long)]
    model: PathBuf,
    /// Input dataset (.parquet, .arrow, .csv, .tsv, .jsonl, .txt)
    #[arg(long)]
    input: PathBuf,
    /// Text columns to embed: one gives column `embedding`, several give `embedding_<column>`
    #[arg(long, default_value = "text")]
    columns: ColumnSpec,
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..))]
    batch_size: u64,
    /// Output .parquet: the input rows plus the embedding column(s), written atomically
    #[arg(long)]
    out: PathBuf,
    #[command(flatten)]
    model_opts: ModelOpts,
}

pub fn run(a: Args) -> Result<()> {
    let enc = a.model_opts.inference()?.encoder(&a.model)?;
    let bar = progress::bar(None, "rows");
    let rows = encode_file(
        &enc,
        &a.input,
        &a.columns,
        a.batch_size as usize,
        &a.out,
        &bar,
    )?;
    bar.finish_and_clear();
    out(&format!(
        "wrote {rows} rows with {} embeddings to {}\n{}\n",
        enc.dim(),
        a.out.display(),
        a.model_opts.matmuls()
    ));
    Ok(())
}
