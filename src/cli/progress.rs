//! What the binary shows: progress on stderr, results on stdout.
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle, TermLike};
use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often a bar's state becomes a line where stderr is not a terminal.
const LINE_EVERY: Duration = Duration::from_secs(30);

/// A bar when the total is known, a counter otherwise. On a terminal it redraws in place; where
/// stderr is not one (a Slurm log, nohup, CI) it writes its state as a plain line when it starts
/// and at most every 30 s after (`LogLines`): indicatif's own default there is nothing at all,
/// so a multi-hour training's log stayed silent until its end.
pub fn bar(total: Option<u64>, unit: &str) -> ProgressBar {
    let terminal = std::io::stderr().is_terminal();
    let bar = match total {
        Some(n) => ProgressBar::new(n),
        None => ProgressBar::new_spinner(),
    };
    // a log line without the drawn bar or the spinner's glyph
    let template = match (total.is_some(), terminal) {
        (true, true) => format!("{{bar:40}} {{pos}}/{{len}} {unit} ({{per_sec}}, eta {{eta}})"),
        (false, true) => format!("{{spinner}} {{pos}} {unit} ({{per_sec}})"),
        (true, false) => format!("{{pos}}/{{len}} {unit} ({{per_sec}}, eta {{eta}})"),
        (false, false) => format!("{{pos}} {unit} ({{per_sec}})"),
    };
    let bar = bar.with_style(ProgressStyle::with_template(&template).expect("valid template"));
    if !terminal {
        let lines = LogLines::new(LINE_EVERY, |line| eprintln!("progress: {line}"));
        // at most one render a second: a counter of rows ticks far more often than that
        bar.set_draw_target(ProgressDrawTarget::term_like_with_hz(Box::new(lines), 1));
    }
    bar
}

/// A draw target for a log: each draw is pieces of text (a line each, then spaces to the
/// width); a bar's line is written when the target starts and then at most once per `every`,
/// lines printed above the bar (`ProgressBar::println`) always, and the cursor moves that
/// redraw a terminal in place are ignored.
struct LogLines {
    every: Duration,
    sink: Box<dyn Fn(&str) + Send + Sync>,
    /// the current draw's lines, and when a bar's line was last written
    state: Mutex<(Vec<String>, Option<Instant>)>,
}

impl LogLines {
    fn new(every: Duration, sink: impl Fn(&str) + Send + Sync + 'static) -> LogLines {
        LogLines {
            every,
            sink: Box::new(sink),
            state: Mutex::new((Vec::new(), None)),
        }
    }
}

impl std::fmt::Debug for LogLines {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LogLines(every {:?})", self.every)
    }
}

impl TermLike for LogLines {
    fn width(&self) -> u16 {
        // wide enough that no line wraps; the spaces that fill a line to it are dropped
        240
    }
    fn move_cursor_up(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }
    fn move_cursor_down(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }
    fn move_cursor_right(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }
    fn move_cursor_left(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }
    fn write_line(&self, s: &str) -> std::io::Result<()> {
        self.write_str(s)
    }
    fn write_str(&self, s: &str) -> std::io::Result<()> {
        let s = s.trim_matches(|c: char| c == '\r' || c == '\n' || c == ' ');
        if !s.is_empty() {
            self.state
                .lock()
                .expect("not poisoned")
                .0
                .push(s.to_string());
        }
        Ok(())
    }
    fn clear_line(&self) -> std::io::Result<()> {
        Ok(())
    }
    fn flush(&self) -> std::io::Result<()> {
        let mut state = self.state.lock().expect("not poisoned");
        let (lines, last) = &mut *state;
        // the last line is the bar's; any before it were printed above it, once
        if let Some(bar) = lines.pop() {
            for line in lines.iter() {
                (self.sink)(line);
            }
            if last.is_none_or(|t| t.elapsed() >= self.every) {
                (self.sink)(&bar);
                *last = Some(Instant::now());
            }
        }
        lines.clear();
        Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn logged(every: Duration) -> (ProgressBar, Arc<Mutex<Vec<String>>>) {
        let got = Arc::new(Mutex::new(Vec::new()));
        let sink = got.clone();
        let lines = LogLines::new(every, move |l| sink.lock().unwrap().push(l.to_string()));
        let bar = ProgressBar::with_draw_target(
            Some(10),
            ProgressDrawTarget::term_like_with_hz(Box::new(lines), 20),
        )
        .with_style(ProgressStyle::with_template("{pos}/{len} steps").unwrap());
        (bar, got)
    }

    /// Where stderr is not a terminal a bar is a line when it starts and then at most one a
    /// period, and a line printed above it is written whole, once, whatever the period.
    #[test]
    fn a_log_gets_a_line_a_period_and_every_printed_line() {
        let (bar, got) = logged(Duration::from_secs(3600));
        bar.tick();
        for _ in 0..5 {
            bar.inc(1);
            std::thread::sleep(Duration::from_millis(60));
        }
        bar.println("step 3: f16 gradients overflowed; update skipped");
        bar.inc(1);
        bar.finish_and_clear();
        let got = got.lock().unwrap().clone();
        assert_eq!(
            got,
            [
                "0/10 steps",
                "step 3: f16 gradients overflowed; update skipped"
            ],
            "one bar line (the period is an hour) and the printed line"
        );
        // a period of zero: every draw is a line, each the bar's state then
        let (bar, got) = logged(Duration::ZERO);
        for _ in 0..3 {
            bar.inc(1);
            std::thread::sleep(Duration::from_millis(60));
        }
        // abandon draws the last state (finish would move it to the end) whatever the rate
        // limiter allowed before
        bar.abandon();
        let got = got.lock().unwrap().clone();
        assert!(got.len() >= 2, "{got:?}");
        assert_eq!(
            got.last().map(String::as_str),
            Some("3/10 steps"),
            "{got:?}"
        );
    }
}
