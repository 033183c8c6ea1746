//! Bi-encoder losses, one a file (as sentence-transformers' losses/ folder), behind one trait and
//! one registry: the registry drives `--loss`'s choices, each loss's default columns and its help.
//! Adding a loss is its file and one line in `LOSSES`.
mod cached_mnr;
mod contrastive;
mod cosine;
mod cross_entropy;
mod functional;
mod margin_mse;
mod mnr;
mod mnr_masked;
mod mse;
mod registry;
mod softmax;
mod spec;
mod triplet;

pub use crate::model::layers::softmax_head::softmax_features;
pub use functional::*;
pub use mnr_masked::false_negatives;
pub use registry::{find, LOSSES};
pub use spec::{required, Loss, LossContext, LossSpec, Ranking, Target};
