//! Stopping a long call between two units of its work (a batch of an encode, a training step),
//! asked by whoever started it: the Python layer turns Ctrl-C into a cancellation of the call in
//! flight, so KeyboardInterrupt comes within one batch or step and leaves what a killed command
//! leaves (outputs whole or absent, the last checkpoint). A call runs `within` a token; the loops
//! `check` it. The token is the calling thread's, carried into worker threads by the loops that
//! start them (`current`), so that two calls on two threads are stopped one at a time.
use crate::error::{Error, Result};
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A call's cancellation: set once, seen by every loop of that call.
#[derive(Clone, Debug, Default)]
pub struct Token(Arc<AtomicBool>);

impl Token {
    pub fn new() -> Token {
        Token::default()
    }

    /// Ask the call to stop at its next check.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    pub fn cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// Err(Error::Interrupted) once cancelled.
    pub fn check(&self) -> Result<()> {
        match self.cancelled() {
            true => Err(Error::Interrupted),
            false => Ok(()),
        }
    }
}

thread_local! {
    static CURRENT: RefCell<Option<Token>> = const { RefCell::new(None) };
}

/// Run `f` with `token` as this thread's (and the worker threads' its loops start).
pub fn within<R>(token: &Token, f: impl FnOnce() -> R) -> R {
    let before = CURRENT.with(|c| c.replace(Some(token.clone())));
    struct Restore(Option<Token>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let before = self.0.take();
            CURRENT.with(|c| *c.borrow_mut() = before);
        }
    }
    let _restore = Restore(before);
    f()
}

/// This thread's token (one that is never cancelled outside `within`): a loop takes it before
/// it hands work to other threads.
pub fn current() -> Token {
    CURRENT.with(|c| c.borrow().clone()).unwrap_or_default()
}

/// Err(Error::Interrupted) if this thread's call was cancelled.
pub fn check() -> Result<()> {
    CURRENT.with(|c| match &*c.borrow() {
        Some(t) => t.check(),
        None => Ok(()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_stops_its_own_call_only() {
        let (a, b) = (Token::new(), Token::new());
        a.cancel();
        within(&a, || {
            assert!(matches!(check(), Err(Error::Interrupted)));
            // a worker thread sees the token its loop carried to it
            let t = current();
            std::thread::scope(|s| s.spawn(move || assert!(t.check().is_err())).join().unwrap());
            within(&b, || assert!(check().is_ok()));
            assert!(check().is_err());
        });
        assert!(check().is_ok());
        assert!(current().check().is_ok());
    }
}
