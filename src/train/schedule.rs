//! The learning-rate schedule and gradient clipping, as transformers and torch define them.

/// transformers' get_linear_schedule_with_warmup: the multiplier for optimizer step `step`
/// (0-based): step / warmup during warm-up, then linear decay to 0 at `total`.
pub fn linear_schedule(step: u64, total: u64, warmup: u64) -> f64 {
    if step < warmup {
        step as f64 / warmup.max(1) as f64
    } else {
        ((total.saturating_sub(step)) as f64 / (total.saturating_sub(warmup)).max(1) as f64)
            .max(0.0)
    }
}

/// The factor torch's clip_grad_norm_ scales gradients by; NaN for a norm that is not finite (no
/// factor makes such gradients usable: the trainer stops, or skips the step under f16).
pub fn clip_factor(norm: f64, max_norm: f64) -> f64 {
    if !norm.is_finite() {
        return f64::NAN;
    }
    let c = max_norm / (norm + 1e-6);
    if c < 1.0 {
        c
    } else {
        1.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_and_clipping() {
        // 10 steps, 2 warm-up: 0, 0.5, then 8/8 .. 1/8
        let f: Vec<f64> = (0..10).map(|s| linear_schedule(s, 10, 2)).collect();
        assert_eq!(
            f,
            [0.0, 0.5, 1.0, 0.875, 0.75, 0.625, 0.5, 0.375, 0.25, 0.125]
        );
        assert_eq!(clip_factor(0.5, 1.0), 1.0);
        assert!((clip_factor(4.0, 1.0) - 1.0 / (4.0 + 1e-6)).abs() < 1e-12);
        assert!(clip_factor(f64::NAN, 1.0).is_nan() && clip_factor(f64::INFINITY, 1.0).is_nan());
    }
}
