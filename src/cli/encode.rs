use super::model_opts::ModelOpts;
use super::shard_opts::{shard_note, ShardOpts};
use super::{out, progress};
use condenser::data::ColumnSpec;
use condenser::encode::encode_file;
use condenser::error::Result;
use condenser::shard;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    #[arg(long)]
    model: PathBuf,
    /// Input dataset (.parquet, .arrow, .csv, .tsv, .jsonl, .txt), or a retrieval folder (BEIR's
    /// or ours): its corpus, as (id, "title text") rows
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
    #[command(flatten)]
    shard: ShardOpts,
}

pub fn run(a: Args) -> Result<()> {
    let inference = a.model_opts.inference()?;
    let shard = a.shard.resolve(|| {
        let job = serde_json::json!({
            "model": a.model,
            "input": a.input,
            "columns": a.columns,
            "batch_size": a.batch_size,
            "inference": inference,
        });
        shard::settings(&job, &[("model", Some(&a.model))])
    })?;
    let enc = inference.encoder(&a.model)?;
    let bar = progress::bar(None, "rows");
    let (rows, dest) = encode_file(
        &enc,
        &a.model,
        &a.input,
        &a.columns,
        a.batch_size as usize,
        &a.out,
        shard.as_ref(),
        &bar,
    )?;
    bar.finish_and_clear();
    out(&format!(
        "wrote {rows} rows with {} embeddings to {}\n{}{}\n",
        enc.dim(),
        dest.display(),
        shard_note(shard.as_ref(), rows, "rows"),
        a.model_opts.matmuls()
    ));
    Ok(())
}
