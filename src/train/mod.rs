//! Training: the loop every training command shares (trainer, config, checkpoints), the tasks
//! (cross-encoder, bi-encoder, Condenser pre-training), their losses and the differentiable ops
//! those use, each gradient-checked.
pub mod adamw;
mod backbone;
pub mod biencoder;
pub mod checkpoint;
pub mod config;
pub mod corpus;
pub mod cross_encoder;
pub mod fingerprint;
pub mod gradcheck;
pub mod grads;
pub mod loss_scale;
pub mod losses;
pub mod masking;
pub mod params;
pub mod pretrain;
pub mod schedule;
pub mod spans;
pub mod task;
pub mod trainer;
#[cfg(test)]
mod trainer_test;

pub use adamw::AdamW;
pub use config::{RunSettings, TaskKey, TrainConfig};
pub use gradcheck::GradCheck;
pub use grads::ParamGrads;
pub use schedule::{clip_factor, linear_schedule};
pub use task::{Gradients, LossOutput, Score, TrainTask};
pub use trainer::{train, TrainReport};
