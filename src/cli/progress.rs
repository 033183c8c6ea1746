//! What the binary shows: progress bars on stderr, results on stdout.
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

/// Print to stdout; a closed pipe (`condenser ... | head`) ends output quietly instead of panicking.
pub fn out(text: &str) {
    use std::io::Write;
    let mut o = std::io::stdout().lock();
    if let Err(e) = o.write_all(text.as_bytes()).and_then(|_| o.flush()) {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("error: writing to stdout: {e}");
        }
    }
}
