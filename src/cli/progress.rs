//! What the binary shows: progress on stderr, results on stdout.
use crate::runtime::progress::{rate, LogLines};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};
use std::io::IsTerminal;
use std::time::Duration;

/// How often a bar's state becomes a line where stderr is not a terminal.
const LINE_EVERY: Duration = Duration::from_secs(30);

/// A bar when the total is known, a counter otherwise. On a terminal it redraws in place; where
/// stderr is not one (a Slurm log, nohup, CI) it writes its state as a plain line when it starts
/// and at most every 30 s after (`LogLines`): indicatif's own default there is nothing at all,
/// so a multi-hour training's log stayed silent until its end.
pub fn bar(total: Option<u64>, unit: &str) -> ProgressBar {
    if QUIET.with(|q| q.get()) {
        return ProgressBar::hidden();
    }
    let terminal = std::io::stderr().is_terminal();
    let bar = match total {
        Some(n) => ProgressBar::new(n),
        None => ProgressBar::new_spinner(),
    };
    // a log line without the drawn bar or the spinner's glyph
    let template = match (total.is_some(), terminal) {
        (true, true) => format!("{{bar:40}} {{pos}}/{{len}} {unit} ({{rate}}, eta {{eta}})"),
        (false, true) => format!("{{spinner}} {{pos}} {unit} ({{rate}})"),
        (true, false) => format!("{{pos}}/{{len}} {unit} ({{rate}}, eta {{eta}})"),
        (false, false) => format!("{{pos}} {unit} ({{rate}})"),
    };
    let style = ProgressStyle::with_template(&template)
        .expect("valid template")
        .with_key("rate", |s: &ProgressState, w: &mut dyn std::fmt::Write| {
            let _ = w.write_str(&rate(s.per_sec()));
        });
    let bar = bar.with_style(style);
    if !terminal {
        let lines = LogLines::new(LINE_EVERY, |line| eprintln!("progress: {line}"));
        // at most one render a second: a counter of rows ticks far more often than that
        bar.set_draw_target(ProgressDrawTarget::term_like_with_hz(Box::new(lines), 1));
    }
    bar
}

thread_local! {
    /// Bars of this thread's commands hidden (Python's `show_progress_bar=False`).
    static QUIET: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Run `f` with its bars hidden where `hidden` (this thread's; the binary never hides them).
pub fn quietly<R>(hidden: bool, f: impl FnOnce() -> R) -> R {
    let before = QUIET.with(|q| q.replace(hidden));
    let r = f();
    QUIET.with(|q| q.set(before));
    r
}

/// Print to stdout; a closed pipe (`condenser ... | head`) ends output quietly instead of panicking.
pub fn out(text: &str) {
    use std::io::Write;
    // a caller that captures (Python's functions) gets the text back instead
    if super::summary::printed(text) {
        return;
    }
    let mut o = std::io::stdout().lock();
    if let Err(e) = o.write_all(text.as_bytes()).and_then(|_| o.flush()) {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("error: writing to stdout: {e}");
        }
    }
}
