use super::out;
use condenser::error::Result;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// The output the whole run would have written: the --out file of encode, augment or mine
    /// (its shards lie beside it), or domain-overlap's --out folder
    out: PathBuf,
}

pub fn run(a: Args) -> Result<()> {
    let s = condenser::shard::merge(&a.out)?;
    out(&format!(
        "merged {} shards of {} ({} rows) into {}\n",
        s.shards,
        s.command,
        s.total,
        a.out.display()
    ));
    Ok(())
}
