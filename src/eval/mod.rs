//! Evaluation: one evaluator a file behind one trait (sentence-transformers' evaluation/ folder),
//! used by `evaluate` and by dev evaluation during training; the metrics; the `[CLS]` attention
//! analysis and the similarity matrix; methods over seeds (`over_seeds`, for `report`).
pub mod accuracy;
pub mod choice;
pub mod choice_report;
pub mod classification;
pub mod cls_attention;
pub mod correlation;
pub mod dev_evidence;
mod evaluator;
pub mod finals;
pub mod loco;
pub mod loco_gains;
pub mod loco_report;
pub mod loco_rule;
pub mod loco_shipped;
pub mod metrics;
pub mod over_seeds;
pub mod pick;
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
