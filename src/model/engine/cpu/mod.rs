//! condenser's own training engine for BERT on the CPU (gpu/ mirrors it on a GPU): forward and backward of the embeddings and
//! the layers written out (llm.c's way) instead of taped op by op. Why (docs/engine.md has the
//! measurements): candle's autograd allocates and zero-fills a gradient buffer for every graph
//! node and adds them up, keeps every intermediate of the forward alive, and holds whatever a
//! stored gradient's graph reaches; on the CPU that was most of a step outside the GEMMs. Here:
//! - sequences are packed, never padded (item i's tokens are rows off_i .. off_i + n_i): every
//!   GEMM and row kernel touches real tokens only;
//! - forward keeps a named, minimal tape per layer (layer.rs), attention keeps no probabilities
//!   (packed_attention.rs), dropout masks are seeded hashes recomputed in backward
//!   (kernels/dropout_hash.rs);
//! - backward accumulates straight into the gradient buffers (GEMM beta 1), across the
//!   mini-batches of GradCache or gradient accumulation, with nothing else kept alive.
//!
//! Heads and losses stay in candle (small): a task runs the engine, hands the hidden states to
//! candle as a leaf, takes the leaf's gradient back and runs the engine's backward. Numbers equal
//! the candle path's (tests/engine.rs) except for dropout's draws (hashed here, a stream there).
pub(super) mod embeddings;
pub(super) mod first_token;
pub(super) mod gemm;
mod grads;
pub(super) mod layer;
mod leaf;
pub(super) mod packed_attention;
pub(super) mod stack;

pub use embeddings::{check_tables, EmbGrads};
pub use gemm::Gemm;
pub use grads::Grads;
pub use layer::LayerGrads;
pub use leaf::{pad, Leaf};
pub use stack::{enabled, Forward, Infer, Stack};
