use indicatif::{ProgressBar, ProgressStyle};

/// A bar when the total is known, a counter otherwise; hidden automatically when stderr is not a
/// terminal (CI logs stay clean).
pub fn bar(total: Option<u64>, unit: &str) -> ProgressBar {
    match total {
        Some(n) => ProgressBar::new(n).with_style(
            ProgressStyle::with_template(&format!(
                "{{bar:40}} {{pos}}/{{len}} {unit} ({{per_sec}}, eta {{eta}})"
            ))
            .expect("valid template"),
        ),
        None => ProgressBar::new_spinner().with_style(
            ProgressStyle::with_template(&format!("{{spinner}} {{pos}} {unit} ({{per_sec}})"))
                .expect("valid template"),
        ),
    }
}
