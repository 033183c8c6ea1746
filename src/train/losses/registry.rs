//! The registry of bi-encoder losses: `--loss`'s choices, in help order.
use super::spec::LossSpec;
use super::{cached_mnr, contrastive, cosine, margin_mse, mnr, mnr_masked, mse, softmax, triplet};

/// Every bi-encoder loss.
pub const LOSSES: &[LossSpec] = &[
    cosine::SPEC,
    mse::SPEC,
    softmax::SPEC,
    mnr::SPEC,
    mnr_masked::SPEC,
    contrastive::SPEC,
    triplet::SPEC,
    margin_mse::SPEC,
    cached_mnr::SPEC,
];

/// The loss named `name`.
pub fn find(name: &str) -> Option<&'static LossSpec> {
    LOSSES.iter().find(|l| l.name == name)
}

impl clap::ValueEnum for LossSpec {
    fn value_variants<'a>() -> &'a [Self] {
        LOSSES
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(
            clap::builder::PossibleValue::new(self.name)
                .help(format!("{}; columns {}", self.help, self.columns)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train::losses::{LossContext, Target};
    use candle_core::Tensor;
    use candle_core::{DType, Device};
    use candle_nn::VarBuilder;

    /// Every loss that reads a target refuses a batch without one with the same error (mse,
    /// cosine and softmax used to panic).
    #[test]
    fn a_missing_target_is_one_clear_error() {
        let dev = Device::Cpu;
        let mut checked = 0;
        for spec in LOSSES.iter().filter(|s| s.target != Target::None) {
            let varmap = candle_nn::VarMap::new();
            let cx = LossContext {
                vb: VarBuilder::from_varmap(&varmap, DType::F32, &dev),
                dim: 8,
                num_labels: 3,
            };
            let loss = (spec.build)(&cx).unwrap();
            let emb: Vec<Tensor> = (0..spec.texts)
                .map(|_| Tensor::randn(0f32, 1.0, (4, 8), &dev).unwrap())
                .collect();
            let e = loss.forward(&emb, None).unwrap_err().to_string();
            assert!(
                e.contains(&format!("loss {} needs", spec.name))
                    && e.contains("the batch has none"),
                "{}: {e}",
                spec.name
            );
            checked += 1;
        }
        assert!(checked >= 4, "{checked} losses with targets");
    }
}
