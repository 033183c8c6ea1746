//! condenser's own training engines for BERT, two that mirror each other (llm.c's way: forward
//! and backward written out instead of taped op by op): `cpu/` and `gpu/`, the same file and
//! type names in each (`stack.rs` a `Stack`, `layer.rs`, `leaf.rs` a `Leaf`, `grads.rs` a
//! `Grads`), and what they share here: the packed batch (`packed.rs`), the model's tensors
//! (`weights.rs`), the choice between them and candle's graph (`backend.rs`), token batches for
//! inference (`batches.rs`) and threads (`threads.rs`).

mod backend;
mod batches;
pub mod cpu;
pub mod gpu;
mod packed;
mod threads;
mod weights;

pub use backend::{Backend, Takes};
pub use batches::{run_batches, token_batches};
pub use packed::Packed;
pub use threads::in_threads;
