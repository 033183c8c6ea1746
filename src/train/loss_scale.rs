//! Dynamic loss scaling for f16 training, as torch.amp.GradScaler does it: the loss is multiplied
//! by a scale before backward so that small gradients survive f16's range (below ~6e-8 they
//! flush to zero); the gradients are divided by it before clipping and the update. A step whose
//! gradients overflowed (inf or NaN) is skipped and the scale halved; after `GROWTH_INTERVAL`
//! clean steps in a row it doubles. bf16 has f32's range and needs none.
use super::checkpoint::TrainState;
use crate::model::kernels::precision::Precision;

pub const INITIAL: f64 = 65536.0;
pub const GROWTH_INTERVAL: u64 = 2000;
/// Never scale below 1 (torch's scaler has no floor; a run that needs one is diverging).
const MIN: f64 = 1.0;

/// Start scaling a fresh f16 run (a resumed one keeps its saved scale).
pub fn init(st: &mut TrainState, p: Precision) {
    if p == Precision::F16 && st.loss_scale.is_none() {
        st.loss_scale = Some(INITIAL);
    }
}

/// The factor the loss is multiplied by (1 when not scaling).
pub fn factor(st: &TrainState) -> f64 {
    st.loss_scale.unwrap_or(1.0)
}

/// Whether the run scales its loss (f16): then overflowing gradients skip the step.
pub fn scaling(st: &TrainState) -> bool {
    st.loss_scale.is_some()
}

/// After a step's (scaled) gradients: whether to apply them (never non-finite ones). Adjusts
/// the scale.
pub fn after_step(st: &mut TrainState, grads_finite: bool) -> bool {
    let Some(scale) = st.loss_scale else {
        return grads_finite;
    };
    if !grads_finite {
        st.loss_scale = Some((scale / 2.0).max(MIN));
        st.scale_good_steps = 0;
        st.skipped_steps += 1;
        return false;
    }
    st.scale_good_steps += 1;
    if st.scale_good_steps == GROWTH_INTERVAL {
        st.loss_scale = Some(scale * 2.0);
        st.scale_good_steps = 0;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn halves_on_overflow_and_doubles_after_clean_steps() {
        let mut st = TrainState::default();
        init(&mut st, Precision::Bf16);
        assert_eq!(factor(&st), 1.0);
        assert!(
            !after_step(&mut st, false),
            "non-finite gradients are never applied"
        );
        assert!(after_step(&mut st, true));
        init(&mut st, Precision::F16);
        assert_eq!(factor(&st), INITIAL);
        assert!(!after_step(&mut st, false));
        assert_eq!((factor(&st), st.skipped_steps), (INITIAL / 2.0, 1));
        for _ in 0..GROWTH_INTERVAL - 1 {
            assert!(after_step(&mut st, true));
        }
        assert_eq!(factor(&st), INITIAL / 2.0);
        assert!(after_step(&mut st, true));
        assert_eq!((factor(&st), st.scale_good_steps), (INITIAL, 0));
    }
}
