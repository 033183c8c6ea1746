//! Evaluation: one evaluator a file behind one trait (sentence-transformers' evaluation/ folder),
//! used by `evaluate` and by dev evaluation during training; the metrics; the `[CLS]` attention
//! analysis and the similarity matrix. What studies do with evaluations (methods over seeds, dev
//! choices, leave one collection out) is study/'s.
pub mod accuracy;
pub mod classification;
pub mod cls_attention;
pub mod correlation;
mod evaluator;
pub mod metrics;
pub mod ranking;
mod registry;
mod results;
pub mod retrieval;
pub mod similarity;
pub mod sts;
mod unique;
pub mod vector_cache;

pub use classification::binary_metrics;
pub use evaluator::{EvalOptions, Evaluation, Evaluator, EvaluatorKind, Metrics, Model};
pub use ranking::ranking_metrics;
pub use registry::{dev_evaluator, EVALUATORS};
pub use results::{EvalReport, EvalResult};
pub use sts::sts_metrics;
pub use unique::encode_unique;
