//! Where the library's notes and warnings go (a resumed run, a stale part folder removed, a BLAS
//! that was asked for and not found, a folder's default pooling): through the caller's hook,
//! set by a front end that wants them elsewhere (a log, Python's warnings); stderr until one is
//! set, which is what the binary wants. Below `cli` nothing else prints (docs/architecture.md).
use std::sync::RwLock;

type Hook = Box<dyn Fn(&str) + Send + Sync>;

static HOOK: RwLock<Option<Hook>> = RwLock::new(None);

/// Send every note from now on to `hook` (None: back to stderr).
pub fn set_hook(hook: Option<Hook>) {
    *HOOK.write().unwrap_or_else(|e| e.into_inner()) = hook;
}

/// Say `msg`, one line with its "note:" or "warning:", through the hook.
pub fn note(msg: &str) {
    let hook = HOOK.read().unwrap_or_else(|e| e.into_inner());
    match &*hook {
        Some(h) => h(msg),
        None => eprintln!("{msg}"),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    #[test]
    fn a_note_goes_to_the_hook_once_one_is_set() {
        let got = Arc::new(Mutex::new(Vec::<String>::new()));
        let sink = got.clone();
        super::set_hook(Some(Box::new(move |m| {
            sink.lock().unwrap().push(m.to_string())
        })));
        super::note("note: only for this test");
        super::set_hook(None);
        let got = got.lock().unwrap();
        assert!(
            got.iter().any(|m| m == "note: only for this test"),
            "{got:?}"
        );
    }
}
