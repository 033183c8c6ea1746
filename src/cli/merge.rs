use super::progress::out;
use crate::data::Io;
use crate::error::Result;
use crate::{overlap, shard};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// The output the whole run would have written: the --out file of encode, augment or mine
    /// (its shards lie beside it), or domain-overlap's --out folder
    out: PathBuf,
}

pub fn run(a: Args) -> Result<()> {
    let (s, data) = shard::shards_of(&a.out)?;
    // each stage's reduction: overlap parts by union or minimum, every other stage's rows in order
    match s.command.as_str() {
        "domain-overlap" => overlap::merge_parts(&data)?.save(&a.out)?,
        _ => shard::concat(&data, &a.out)?,
    }
    out(&format!(
        "merged {} shards of {} ({} rows) into {}\n",
        s.shards,
        s.command,
        s.total,
        a.out.display()
    ));
    Ok(())
}

impl Args {
    /// The shards are this output's own parts, beside or inside it: only --out is named.
    pub fn io(&self) -> Io {
        Io::new().output("OUT", &self.out)
    }
}
