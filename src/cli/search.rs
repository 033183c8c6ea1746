use super::model_opts::ModelOpts;
use super::progress::{self, out};
use super::search_flags::{score_fn, UseIndex};
use super::shard_opts::{shard_note, ShardOpts};
use crate::data::Io;
use crate::error::Result;
use crate::flags::{CorpusEmbeddings, InferenceBatch};
use crate::search::{search_stored, with_inputs, Queries, ScoreFn, StoredEmbeddings, Wanted};
use crate::shard;
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
#[command(mut_arg("corpus_embeddings", |a| a.required(true)))]
pub struct Args {
    // (streamed: memory does not grow with the corpus)
    #[command(flatten)]
    corpus: CorpusEmbeddings,
    /// Queries to embed with --model: a retrieval folder (its queries) or a file with id and text
    #[arg(long, requires = "model", conflicts_with = "query_embeddings")]
    queries: Option<PathBuf>,
    /// The model that made --corpus-embeddings; embeds --queries
    #[arg(value_parser = crate::model::folders::home::parse_model, long)]
    model: Option<PathBuf>,
    /// Stored query embeddings (`encode` with the corpus's model), instead of --queries
    #[arg(long, required_unless_present = "queries", conflicts_with = "model")]
    query_embeddings: Option<PathBuf>,
    /// Results kept per query, best first
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
    top_k: u64,
    /// How a query scores a document: cosine, or dot (the raw inner product)
    #[arg(long, value_parser = score_fn(), default_value = "cosine")]
    score_fn: ScoreFn,
    #[command(flatten)]
    batch: InferenceBatch,
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
            let corpus = StoredEmbeddings::for_model(a.corpus.required(), &enc, model)?;
            let bar = progress::bar(None, "queries embedded");
            let queries = Queries::embed(q, &enc, a.batch.batch_size, &bar)?;
            bar.finish_and_clear();
            (corpus, queries)
        }
        (None, Some(qe), None) => {
            // no model: the corpus store is taken as it is, and the queries' must match it
            let corpus = StoredEmbeddings::open_as_made(a.corpus.required())?;
            let queries = Queries::stored(&StoredEmbeddings::open(qe, &corpus.meta)?)?;
            (corpus, queries)
        }
        _ => unreachable!("clap requires --queries with --model, or --query-embeddings"),
    };
    let shard = a.shard.resolve(|| {
        let job = serde_json::json!({
            "corpus_embeddings": a.corpus.required(),
            "queries": a.queries,
            "query_embeddings": a.query_embeddings,
            "top_k": a.top_k,
            "score_fn": a.score_fn.name(),
            "index": a.use_index.index,
            "breadth": a.use_index.breadth(),
            "inference": inference,
        });
        let stores: Vec<&Path> = std::iter::once(a.corpus.required())
            .chain(a.query_embeddings.as_deref())
            .collect();
        let settings = shard::settings(&job, &[("model", a.model.as_deref())])?;
        with_inputs(settings, &stores, a.use_index.index.as_deref())
    })?;
    let index = a.use_index.open(&corpus)?;
    let bar = progress::bar(None, "documents searched");
    let t0 = std::time::Instant::now();
    let wanted = Wanted {
        score: a.score_fn,
        k: a.top_k as usize,
        index: index.as_ref().map(|(i, b)| (i, *b)),
    };
    let s = search_stored(&corpus, &queries, &wanted, &a.out, shard.as_ref(), &bar)?;
    bar.finish_and_clear();
    out(&format!(
        "{}\n{}{}\n",
        s.line(a.top_k as usize, t0.elapsed().as_secs_f64()),
        shard_note(shard.as_ref(), s.queries, "queries"),
        a.model_opts.matmuls()
    ));
    Ok(())
}

impl Args {
    pub fn io(&self) -> Io {
        Io::new()
            .inputs("--corpus-embeddings", &self.corpus.corpus_embeddings)
            .inputs("--queries", &self.queries)
            .inputs("--model", &self.model)
            .inputs("--query-embeddings", &self.query_embeddings)
            .inputs("--index", &self.use_index.index)
            .output("--out", &self.out)
    }
}
