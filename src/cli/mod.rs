//! Command-line drivers: each subcommand's flags (typed and validated by clap once) and one call
//! into the library; printing happens here and nowhere in the library.
mod analyze;
mod augment;
mod choose;
mod command;
mod command_line;
mod convert;
mod domain_overlap;
mod encode;
mod eval_sets;
mod evaluate;
mod index;
mod index_flags;
mod interpolate;
mod loco;
mod merge;
mod mine;
mod model_opts;
mod named;
mod pick;
mod pretrain;
mod progress;
mod report;
mod run_recipe;
mod search;
mod search_flags;
mod shard_opts;
mod similarity;
mod split;
mod train_biencoder;
mod train_cross_encoder;
mod train_driver;
mod train_nli;
mod train_opts;
mod transfer_grid;

pub use command::main;
