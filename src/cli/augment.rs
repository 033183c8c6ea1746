use super::model_opts::inference_matmuls;
use super::progress::{self, out};
use super::shard_opts::{shard_note, ShardOpts};
use crate::augment::{write_pseudo_pairs, write_query_pairs, AugmentJob, PseudoSpec, QuerySpec};
use crate::data::Io;
use crate::error::{Error, Result};

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub job: AugmentJob,
    #[command(flatten)]
    pseudo: PseudoSpec,
    #[command(flatten)]
    queries: QuerySpec,
    /// A shard draws the whole (seeded) sample and labels its blocks of the pair list
    #[command(flatten)]
    shard: ShardOpts,
}

pub fn run(mut a: Args) -> Result<()> {
    if a.pseudo.corpus.is_some() {
        return pseudo(&a);
    }
    a.job.spec.shard = a.shard.resolve(|| a.job.shard_settings())?;
    let bar = progress::bar(Some(0), "pairs labelled");
    let s = a.job.run(&bar)?;
    bar.finish_and_clear();
    let rows = s.gold + s.target + s.sampled;
    out(&format!(
        "wrote {rows} pairs ({} gold, {} target, {} sampled; {} labelled by the cross-encoder) to {}\n{}{}\n",
        s.gold,
        s.target,
        s.sampled,
        s.labelled,
        s.out.display(),
        shard_note(a.job.spec.shard.as_ref(), rows, "pairs"),
        inference_matmuls(a.job.device)
    ));
    Ok(())
}

/// `augment --corpus`: pseudo-query pairs, no model; seconds even for large corpora, so unsharded.
fn pseudo(a: &Args) -> Result<()> {
    if a.shard.resolve(|| Ok(Default::default()))?.is_some() {
        return Err(Error::msg(
            "augment --corpus runs unsharded (it reads the corpus once and loads no model)",
        ));
    }
    let out_path = &a.job.spec.out;
    if a.queries.queries.is_some() {
        let n = write_query_pairs(&a.pseudo, &a.queries, out_path)?;
        out(&format!(
            "wrote {n} query pairs ({} positives) to {}\n",
            a.queries.positives.name(),
            out_path.display()
        ));
        return Ok(());
    }
    let s = write_pseudo_pairs(&a.pseudo, a.job.spec.seed.seed, out_path)?;
    out(&format!(
        "wrote {} pseudo-query pairs ({} title-body, {} crop) from {} documents ({} duplicate or \
         empty texts dropped) to {}\n",
        s.title_body + s.crops,
        s.title_body,
        s.crops,
        s.documents,
        s.duplicates,
        out_path.display()
    ));
    Ok(())
}

impl Args {
    pub fn io(&self) -> Io {
        let (job, spec) = (&self.job, &self.job.spec);
        Io::new()
            .inputs("--cross-encoder", &job.cross_encoder)
            .inputs("--model", &job.model)
            .inputs("--input", &spec.input)
            .inputs("--corpus", &self.pseudo.corpus)
            .inputs("--queries", &self.queries.queries)
            .inputs("--retriever", &self.queries.retriever)
            .output("--out", &spec.out)
    }
}
