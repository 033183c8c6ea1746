//! The library's notes and warnings in Python (a folder's default pooling, a resumed run, a
//! BLAS asked for and not found): through logging's `condenser` logger, as sentence-transformers
//! says its own through `logging`, so a program can route, capture or silence them; with no
//! logging set up, Python prints them on stderr as the binary does. The library may say a note on
//! any thread, the GIL held by the waiting thread or not; so the hook only queues it, and the
//! thread that waits on a call (holding the GIL between its waits: call.rs) hands the queue to
//! logging, in the order the notes were said.
use pyo3::prelude::*;
use std::sync::Mutex;

static QUEUE: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Every note from now on queued for `flush` (at the module's import).
pub fn install() {
    condenser::runtime::notes::set_hook(Some(Box::new(|msg: &str| {
        let mut q = QUEUE.lock().unwrap_or_else(|e| e.into_inner());
        q.push(msg.to_string());
    })));
}

/// The queued notes to logging's `condenser` logger, each at WARNING (they are what the binary
/// prints on stderr, where sentence-transformers warns of the same, a default pooling say).
/// Where logging itself fails (a handler that raises), the rest go to stderr: never lost.
pub fn flush(py: Python<'_>) {
    let notes = std::mem::take(&mut *QUEUE.lock().unwrap_or_else(|e| e.into_inner()));
    if notes.is_empty() {
        return;
    }
    let logger = py
        .import("logging")
        .and_then(|l| l.call_method1("getLogger", ("condenser",)));
    let mut notes = notes.into_iter();
    if let Ok(logger) = logger {
        for n in notes.by_ref() {
            if let Err(e) = logger.call_method1("warning", (&n,)) {
                eprintln!("{n}\n(logging failed: {e})");
                break;
            }
        }
    }
    for n in notes {
        eprintln!("{n}");
    }
}
