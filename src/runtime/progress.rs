//! Progress where stderr is not a terminal: a draw target for indicatif's bars that writes plain
//! lines to a log (the binary's bars use it there, src/cli/progress.rs).
use indicatif::TermLike;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A draw target for a log: each draw is pieces of text (a line each, then spaces to the
/// width); a bar's line is written when the target starts and then at most once per `every`,
/// lines printed above the bar (`ProgressBar::println`) always, and the cursor moves that
/// redraw a terminal in place are ignored.
pub struct LogLines {
    every: Duration,
    sink: Box<dyn Fn(&str) + Send + Sync>,
    /// the current draw's lines, and when a bar's line was last written
    state: Mutex<(Vec<String>, Option<Instant>)>,
}

impl LogLines {
    /// Lines to `sink`, a bar's at most once per `every`.
    pub fn new(every: Duration, sink: impl Fn(&str) + Send + Sync + 'static) -> LogLines {
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
        // words one space apart: an empty template field (a bar's message before it has one)
        // left two side by side
        let words: Vec<&str> = s.split_whitespace().collect();
        if !words.is_empty() {
            let mut state = self.state.lock().expect("not poisoned");
            state.0.push(words.join(" "));
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

/// A rate for a progress line: three significant figures or the whole number (indicatif's own
/// `{per_sec}` printed four decimals, "565,440.8948/s").
pub fn rate(per_sec: f64) -> String {
    match per_sec {
        r if !r.is_finite() => "-".to_string(),
        r if r >= 100.0 => format!("{r:.0}/s"),
        r if r >= 10.0 => format!("{r:.1}/s"),
        r => format!("{r:.2}/s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
    use std::sync::Arc;

    fn logged(every: Duration) -> (ProgressBar, Arc<Mutex<Vec<String>>>) {
        let got = Arc::new(Mutex::new(Vec::new()));
        let sink = got.clone();
        let lines = LogLines::new(every, move |l| sink.lock().unwrap().push(l.to_string()));
        let bar = ProgressBar::with_draw_target(
            Some(10),
            ProgressDrawTarget::term_like_with_hz(Box::new(lines), 20),
        )
        .with_style(ProgressStyle::with_template("{pos}/{len} steps {msg}").unwrap());
        (bar, got)
    }

    #[test]
    fn rates_keep_three_figures_or_the_whole_number() {
        let got: Vec<String> = [565_440.894_8, 123.456, 65.64, 3.869_5, 0.0, f64::NAN]
            .into_iter()
            .map(rate)
            .collect();
        assert_eq!(
            got,
            ["565441/s", "123/s", "65.6/s", "3.87/s", "0.00/s", "-"]
        );
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
