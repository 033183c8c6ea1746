//! Recipes: a TOML file of steps, each one condenser subcommand with its flags and the outputs
//! that show it is done. `condenser run` executes them in order and skips finished ones, so an
//! interrupted recipe resumes (a killed training step continues from its checkpoint), and a step
//! runs again when its arguments or any file it reads changed (`state`).
//!
//! ```toml
//! [vars]
//! out = "out/example"
//! [[step]]
//! name = "cross-encoder"
//! command = "train-cross-encoder"
//! outputs = ["{out}/ce/model.safetensors"]
//! args = { model = "all-MiniLM-L6-v2", train = "...", out = "{out}/ce", both-orders = true }
//! ```
pub mod grid;
mod parse;
mod runner;
mod state;
mod step;

pub use parse::{known_keys, read_toml, substitute, Recipe};
pub use runner::{Exec, Runner, StepMode};
pub use state::{Decision, State};
pub use step::Step;
