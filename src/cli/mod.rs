//! Command-line drivers: each subcommand's flags (typed and validated by clap once) and one call
//! into the library; printing happens here and nowhere in the library.
mod analyze;
mod augment;
mod command;
mod convert;
mod domain_overlap;
mod encode;
mod eval_sets;
mod evaluate;
mod index;
mod merge;
mod mine;
mod model_opts;
mod named;
mod pretrain;
mod progress;
mod report;
mod run;
mod search;
mod shard_opts;
mod similarity;
mod split;
mod train_biencoder;
mod train_cross_encoder;
mod train_nli;
mod train_opts;
mod train_run;
mod transfer_grid;

use clap::Parser;
use command::{dispatch, Cli, Command};
use condenser::error::{Error, Result};
use progress::out;

pub fn main() -> Result<()> {
    dispatch(Cli::parse().command)
}

/// Run one subcommand from its argv (argv[0] is the program name), as a recipe step does.
fn run_argv(argv: impl IntoIterator<Item = String>) -> Result<()> {
    dispatch(parse_argv(argv)?)
}

/// Parse a subcommand's argv without running it.
fn parse_argv(argv: impl IntoIterator<Item = String>) -> Result<Command> {
    Ok(Cli::try_parse_from(argv)
        .map_err(|e| Error::msg(e.to_string().trim_end()))?
        .command)
}
