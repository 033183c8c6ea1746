//! The `condenser` binary: flag parsing and one library call per subcommand (src/cli).
mod cli;

fn main() {
    // the process's own settings, made while it has one thread (setenv is safe only then) and
    // before the libraries start: the allocator, and the environment OpenBLAS and candle read
    condenser::runtime::tune_allocator();
    condenser::model::kernels::blas::prepare_env();
    // a file-size limit (ulimit -f) makes a write fail with an error that names the file, instead
    // of killing the process without a word; the output it replaces stays whole (written to a
    // temporary file and renamed)
    // SAFETY: ignoring a signal before any thread starts
    unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
    if let Err(e) = cli::main() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
