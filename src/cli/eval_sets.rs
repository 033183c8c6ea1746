//! `evaluate`'s dataset flags, generated from the library's evaluator registry.
use super::named::Named;
use crate::data::Io;
use crate::error::{Error, Result};
use crate::eval::EVALUATORS;
use clap::{Arg, ArgAction, ArgMatches};

/// The datasets to evaluate on: one `--<kind> NAME=PATH` flag per evaluator kind in the library's
/// registry (`crate::eval::EVALUATORS`), in command-line order.
#[derive(Clone, Debug, Default)]
pub struct EvalSets(pub Vec<(usize, Named)>);

impl EvalSets {
    /// Err when no dataset was given, naming the flags that give one.
    pub fn require_some(&self) -> Result<()> {
        if !self.0.is_empty() {
            return Ok(());
        }
        let flags: Vec<String> = EVALUATORS.iter().map(|k| format!("--{}", k.flag)).collect();
        Err(Error::msg(format!(
            "nothing to evaluate: give datasets with {}",
            flags.join(", ")
        )))
    }

    /// Whether every dataset is a retrieval set.
    pub fn retrieval_only(&self) -> bool {
        self.0
            .iter()
            .all(|(k, _)| EVALUATORS[*k].flag == "retrieval")
    }
}

impl clap::FromArgMatches for EvalSets {
    fn from_arg_matches(m: &ArgMatches) -> std::result::Result<Self, clap::Error> {
        let mut sets = Vec::new();
        for (k, kind) in EVALUATORS.iter().enumerate() {
            if let (Some(vals), Some(at)) =
                (m.get_many::<Named>(kind.flag), m.indices_of(kind.flag))
            {
                sets.extend(vals.zip(at).map(|(v, i)| (i, k, v.clone())));
            }
        }
        sets.sort_by_key(|s| s.0);
        Ok(EvalSets(sets.into_iter().map(|(_, k, v)| (k, v)).collect()))
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> std::result::Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

impl clap::Args for EvalSets {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        EVALUATORS.iter().fold(cmd, |c, k| {
            c.arg(
                Arg::new(k.flag)
                    .long(k.flag)
                    .value_name("NAME=PATH")
                    .action(ArgAction::Append)
                    .value_parser(clap::value_parser!(Named))
                    .help(k.help),
            )
        })
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

impl EvalSets {
    /// The evaluation sets' paths as the guard's inputs.
    pub fn inputs(&self, io: Io) -> Io {
        self.0.iter().fold(io, |io, (k, set)| {
            io.input(&format!("--{}", EVALUATORS[*k].flag), &set.path)
        })
    }
}

/// `--vector-cache` as evaluate and choose both use it: the library's cache, and the folder among
/// the command's outputs (written, never read as an input a recipe fingerprints).
impl crate::flags::VectorCacheDir {
    pub fn cache(&self) -> Option<crate::eval::vector_cache::VectorCache> {
        (self.vector_cache.as_deref()).map(crate::eval::vector_cache::VectorCache::new)
    }

    pub fn outputs(&self, io: Io) -> Io {
        (self.vector_cache.iter()).fold(io, |io, d| io.output("--vector-cache", d))
    }
}
