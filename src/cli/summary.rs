//! What a command run from Python returns instead of only printing it: the text it would print
//! on stdout, the outputs its guard named, its wall time and the figures its driver records
//! (a training's steps and rates, an evaluation's metrics), as one JSON object. Kept per thread
//! while a caller captures (`capture`); the binary captures nothing and prints as always.
use serde_json::{Map, Value};
use std::cell::RefCell;

thread_local! {
    static CURRENT: RefCell<Option<Summary>> = const { RefCell::new(None) };
}

#[derive(Debug, Default)]
pub struct Summary {
    /// What the command printed on stdout, in order.
    pub printed: String,
    /// The figures its driver recorded, by name.
    pub fields: Map<String, Value>,
}

/// Run `f` with this thread's output captured: the lines `progress::out` would print and the
/// figures `record`ed come back with its result instead of going to stdout.
pub fn capture<R>(f: impl FnOnce() -> R) -> (R, Summary) {
    let before = CURRENT.with(|c| c.replace(Some(Summary::default())));
    let r = f();
    let got = CURRENT.with(|c| c.replace(before)).unwrap_or_default();
    (r, got)
}

/// Keep a figure for the caller's summary (nothing when no caller captures); a recipe's steps
/// each keep theirs under the step's own name, a later value replacing an earlier one.
pub fn record(key: &str, value: impl serde::Serialize) {
    CURRENT.with(|c| {
        if let Some(s) = c.borrow_mut().as_mut() {
            let v = serde_json::to_value(value).unwrap_or(Value::Null);
            s.fields.insert(key.to_string(), v);
        }
    });
}

/// Take `text` into the capture when there is one (true), else leave it to be printed (false).
pub(super) fn printed(text: &str) -> bool {
    CURRENT.with(|c| match c.borrow_mut().as_mut() {
        Some(s) => {
            s.printed.push_str(text);
            true
        }
        None => false,
    })
}
