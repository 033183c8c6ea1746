//! The command line being run, kept for model cards: the process's own, or a recipe step's
//! (set by the dispatcher before the step runs), this thread's (two commands run from two Python
//! threads at once keep their own). A leaf: the drivers read it, the dispatcher sets it.
use std::cell::RefCell;

thread_local! {
    /// The command line being run on this thread (a recipe's step: that step's), for model cards.
    static COMMAND_LINE: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Keep `argv` (the program's name first) as the command line, each word quoted where a shell
/// would split or expand it.
pub fn set<S: AsRef<str>>(argv: &[S]) {
    let words: Vec<String> = std::iter::once("condenser")
        .chain(argv.iter().skip(1).map(|a| a.as_ref()))
        .map(|w| {
            // quoted where a shell would split or expand it
            let plain = !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
            match plain {
                true => w.to_string(),
                false => format!("'{}'", w.replace('\'', r"'\''")),
            }
        })
        .collect();
    COMMAND_LINE.with(|c| *c.borrow_mut() = words.join(" "));
}

/// The command line being run, as a shell would take it back.
pub fn get() -> String {
    COMMAND_LINE.with(|c| c.borrow().clone())
}
