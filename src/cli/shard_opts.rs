//! The flags of every command that can run as one shard of many (encode, augment, mine,
//! domain-overlap).
use crate::error::Result;
use crate::shard::{Settings, Shard, ShardRun};

#[derive(clap::Args, Clone, Debug)]
pub struct ShardOpts {
    /// Run shard I of N (0-based): a fixed range of whole 1,024-row blocks, written as
    /// OUT.shard-0000I-of-0000N.* with a manifest, for `condenser merge OUT` [default: Slurm's
    /// SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT, or JOB_COMPLETION_INDEX with --shard-count]
    #[arg(long, value_name = "I/N")]
    shard: Option<Shard>,
    /// The shard count of a Kubernetes Indexed Job (its completions), read with JOB_COMPLETION_INDEX
    #[arg(long, value_name = "N")]
    shard_count: Option<usize>,
}

impl ShardOpts {
    /// The shard to run, if any, with the settings its manifest records (`shard::settings`); a
    /// shard taken from the scheduler's environment is announced on stderr.
    pub fn resolve(&self, settings: impl FnOnce() -> Result<Settings>) -> Result<Option<ShardRun>> {
        let Some((shard, from)) =
            Shard::resolve(self.shard, self.shard_count, |k| std::env::var(k).ok())?
        else {
            return Ok(None);
        };
        if from != "--shard" {
            eprintln!("running shard {shard} (from {from})");
        }
        Ok(Some(ShardRun {
            shard,
            settings: settings()?,
        }))
    }
}

/// The line a sharded command prints about what it wrote.
pub fn shard_note(run: Option<&ShardRun>, rows: usize, what: &str) -> String {
    match run {
        Some(r) => format!(
            "shard {} ({rows} {what}); merge all {} with `condenser merge` on the whole run's output\n",
            r.shard, r.shard.count
        ),
        None => String::new(),
    }
}
