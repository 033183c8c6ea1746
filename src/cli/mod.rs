//! Command-line drivers: each subcommand parses its flags, calls the library and prints.
mod convert;
mod domain_overlap;
mod progress;

use crate::error::Result;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "condenser",
    version,
    about = "Domain overlap, AugSBERT and Condenser pre-training for sentence encoders"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Jaccard similarity of WordPiece n-gram sets between datasets
    DomainOverlap(domain_overlap::Args),
    /// Convert a dataset (Parquet, Arrow IPC, CSV, TSV, JSONL) to Parquet (zstd)
    Convert(convert::Args),
}

pub fn main() -> Result<()> {
    match Cli::parse().command {
        Command::DomainOverlap(a) => domain_overlap::run(a),
        Command::Convert(a) => convert::run(a),
    }
}

/// Split "a,b,c" flags into names.
fn split_list(s: &str) -> Vec<String> {
    s.split(',')
        .map(|c| c.trim().to_string())
        .filter(|c| !c.is_empty())
        .collect()
}

/// Print to stdout; a closed pipe (`condenser ... | head`) ends output quietly instead of panicking.
fn out(text: &str) {
    use std::io::Write;
    let mut o = std::io::stdout().lock();
    if let Err(e) = o.write_all(text.as_bytes()).and_then(|_| o.flush()) {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("error: writing to stdout: {e}");
        }
    }
}
