//! Training: gradient checks for every op a training forward pass uses, and (next) losses, the
//! optimizer, the schedule and the trainer.
pub mod gradcheck;

pub use gradcheck::GradCheck;
