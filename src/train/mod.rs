//! Training: gradient checks for every op a training forward pass uses, and (next) losses, the
//! optimizer, the schedule and the trainer.
pub mod biencoder;
pub mod checkpoint;
pub mod corpus;
pub mod cross_encoder;
pub mod dev;
pub mod gradcheck;
pub mod losses;
pub mod masking;
pub mod optim;
pub mod params;
pub mod pretrain;
pub mod spans;
pub mod trainer;

pub use gradcheck::GradCheck;
pub use optim::{clip_factor, linear_schedule, AdamW};
pub use trainer::{train, TrainConfig, TrainReport, TrainTask};
