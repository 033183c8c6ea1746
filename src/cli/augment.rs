use super::model_opts::matmuls;
use super::shard_opts::{shard_note, ShardOpts};
use super::{out, progress};
use condenser::augment::AugmentJob;
use condenser::error::Result;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    job: AugmentJob,
    /// A shard draws the whole (seeded) sample and labels its blocks of the pair list
    #[command(flatten)]
    shard: ShardOpts,
}

pub fn run(mut a: Args) -> Result<()> {
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
        matmuls(a.job.device)
    ));
    Ok(())
}
