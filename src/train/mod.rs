//! Training: gradient checks for every op a training forward pass uses, and (next) losses, the
//! optimizer, the schedule and the trainer.
pub mod gradcheck;
pub mod optim;

pub use gradcheck::GradCheck;
pub use optim::{clip_factor, linear_schedule, AdamW};
