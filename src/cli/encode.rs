use super::model_opts::ModelOpts;
use super::progress::{self, out};
use super::shard_opts::{shard_note, ShardOpts};
use crate::data::ColumnSpec;
use crate::data::Io;
use crate::encode::encode_file;
use crate::error::Result;
use crate::flags::{InferenceBatch, PromptFlags};
use crate::shard;
use crate::shard::parts::{Resume, Stale};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Model folder (sentence-transformers or Hugging Face layout)
    #[arg(value_parser = crate::model::folders::home::parse_model, long)]
    model: PathBuf,
    /// Input dataset (.parquet, .arrow, .csv, .tsv, .jsonl, .txt), or a retrieval folder (BEIR's
    /// or ours): its corpus, as (id, "title text") rows
    #[arg(long)]
    input: PathBuf,
    /// Text columns to embed: one gives column `embedding`, several give `embedding_<column>`
    #[arg(long, default_value = "text")]
    columns: ColumnSpec,
    #[command(flatten)]
    batch: InferenceBatch,
    #[command(flatten)]
    prompt: PromptFlags,
    /// Output .parquet: the input rows plus the embedding column(s), written atomically
    #[arg(long)]
    out: PathBuf,
    #[command(flatten)]
    model_opts: ModelOpts,
    #[command(flatten)]
    shard: ShardOpts,
    /// Parts an interrupted run left with other settings: refused, or replaced (a recipe's step)
    #[arg(skip)]
    pub stale: Stale,
}

pub fn run(a: Args) -> Result<()> {
    let inference = a.model_opts.inference()?;
    // the model first: a missing one is named with where it was looked for, before its
    // fingerprint is taken
    let enc = inference.encoder(&a.model)?;
    let (name, text) = (a.prompt.prompt_name.as_deref(), a.prompt.prompt.as_deref());
    let prompt = enc.prompts.for_flags(name, text, a.input.is_dir())?;
    let job = serde_json::json!({
        "model": a.model,
        "input": a.input,
        "columns": a.columns,
        "batch_size": a.batch.batch_size,
        "inference": inference,
        "prompt": prompt,
    });
    // a shard's manifest and an interrupted run's parts record the same settings
    let settings = shard::settings(&job, &[("model", Some(&a.model))])?;
    let shard = a.shard.resolve(|| Ok(settings.clone()))?;
    let bar = progress::bar(None, "rows");
    let (rows, dest) = encode_file(
        &enc,
        &a.model,
        &a.input,
        &a.columns,
        prompt.as_deref(),
        a.batch.batch_size,
        &a.out,
        shard.as_ref(),
        &Resume {
            settings,
            stale: a.stale,
        },
        &bar,
    )?;
    bar.finish_and_clear();
    super::summary::record("rows", rows);
    super::summary::record("dim", enc.dim());
    super::summary::record("prompt", &prompt);
    out(&format!(
        "wrote {rows} rows with {} embeddings to {}\n{}{}\n",
        enc.dim(),
        dest.display(),
        shard_note(shard.as_ref(), rows, "rows"),
        a.model_opts.matmuls()
    ));
    Ok(())
}

impl Args {
    /// What the output guard compares (data::Io).
    pub fn io(&self) -> Io {
        Io::new()
            .input("--model", &self.model)
            .input("--input", &self.input)
            .output("--out", &self.out)
    }
}
