use super::index::UseIndex;
use super::model_opts::ModelOpts;
use super::shard_opts::{shard_note, ShardOpts};
use super::{out, progress};
use condenser::encode::{
    open_index, search_stored, with_inputs, Queries, StoredEmbeddings, Wanted,
};
use condenser::error::Result;
use condenser::eval::retrieval::ScoreFn;
use condenser::shard;
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct Args {
    /// The corpus's embeddings as `condenser encode` wrote them (a file, or the folder of a
    /// sharded encode), streamed: memory does not grow with the corpus
    #[arg(long)]
    corpus_embeddings: PathBuf,
    /// Queries to embed with --model: a retrieval folder (its queries) or a file with id and text
    #[arg(long, requires = "model", conflicts_with = "query_embeddings")]
    queries: Option<PathBuf>,
    /// The model that made --corpus-embeddings; embeds --queries
    #[arg(long)]
    model: Option<PathBuf>,
    /// Stored query embeddings (`encode` with the corpus's model), instead of --queries
    #[arg(long, required_unless_present = "queries", conflicts_with = "model")]
    query_embeddings: Option<PathBuf>,
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
    top_k: u64,
    #[arg(long, value_enum, default_value = "cosine")]
    score_fn: ScoreFn,
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..))]
    batch_size: u64,
    /// Output .parquet: query_id, rank, doc_id, score (best first)
    #[arg(long)]
    out: PathBuf,
    #[command(flatten)]
    use_index: UseIndex,
    #[command(flatten)]
    model_opts: ModelOpts,
    /// A shard searches its blocks of 1,024 queries against the whole corpus
    #[command(flatten)]
    shard: ShardOpts,
}

pub fn run(a: Args) -> Result<()> {
    let inference = a.model_opts.inference()?;
    let (corpus, queries) = match (&a.queries, &a.query_embeddings, &a.model) {
        (Some(q), None, Some(model)) => {
            let enc = inference.encoder(model)?;
            let corpus = StoredEmbeddings::for_model(&a.corpus_embeddings, &enc, model)?;
            let bar = progress::bar(None, "queries embedded");
            let queries = Queries::embed(q, &enc, a.batch_size as usize, &bar)?;
            bar.finish_and_clear();
            (corpus, queries)
        }
        (None, Some(qe), None) => {
            // no model: the corpus store is taken as it is, and the queries' must match it
            let corpus = StoredEmbeddings::open_as_made(&a.corpus_embeddings)?;
            let queries = StoredEmbeddings::open(qe, &corpus.meta)?;
            (corpus, Queries::stored(&queries)?)
        }
        _ => unreachable!("clap requires --queries with --model, or --query-embeddings"),
    };
    let shard = a.shard.resolve(|| {
        let job = serde_json::json!({
            "corpus_embeddings": a.corpus_embeddings,
            "queries": a.queries,
            "query_embeddings": a.query_embeddings,
            "top_k": a.top_k,
            "score_fn": a.score_fn.name(),
            "index": a.use_index.index,
            "breadth": a.use_index.breadth(),
            "inference": inference,
        });
        let stores: Vec<&Path> = std::iter::once(&a.corpus_embeddings)
            .chain(&a.query_embeddings)
            .map(PathBuf::as_path)
            .collect();
        let settings = shard::settings(&job, &[("model", a.model.as_deref())])?;
        with_inputs(settings, &stores, a.use_index.index.as_deref())
    })?;
    let index = a.use_index.index.as_ref();
    let index = index.map(|p| open_index(p, &corpus)).transpose()?;
    let breadth = index.as_ref().map(|i| i.breadth(a.use_index.breadth()));
    let bar = progress::bar(None, "documents searched");
    let t0 = std::time::Instant::now();
    let wanted = Wanted {
        score: a.score_fn,
        k: a.top_k as usize,
        index: index.as_ref().zip(breadth.transpose()?),
    };
    let s = search_stored(&corpus, &queries, &wanted, &a.out, shard.as_ref(), &bar)?;
    bar.finish_and_clear();
    out(&format!(
        "{} queries x {} documents ({}), top {}: {} rows -> {} in {:.1} s\n{}{}\n",
        s.queries,
        s.docs,
        s.how(),
        a.top_k,
        s.rows,
        s.dest.display(),
        t0.elapsed().as_secs_f64(),
        shard_note(shard.as_ref(), s.queries, "queries"),
        a.model_opts.matmuls()
    ));
    Ok(())
}
