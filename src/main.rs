//! The `condenser` binary: the library's command line (src/cli), as the Python package's
//! `condenser` command runs it too.
use condenser::cli;

fn main() {
    // every CONDENSER_* setting read once, before any work: a bad value is the command's one
    // error, naming the variable and its valid values (never a panic in a kernel later)
    if let Err(e) = condenser::settings::check() {
        eprintln!("error: {e}");
        std::process::exit(2);
    }
    // the process's own settings, made while it has one thread (setenv is safe only then) and
    // before the libraries start: the allocator, and the environment OpenBLAS and candle read
    condenser::runtime::tune_allocator();
    condenser::model::kernels::blas::prepare_env();
    // a file-size limit (ulimit -f) makes a write fail with an error that names the file, instead
    // of killing the process without a word; the output it replaces stays whole (written to a
    // temporary file and renamed)
    // SAFETY: ignoring a signal before any thread starts
    unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
    let done = cli::main();
    // the GPU's memory is a figure like speed, and the host's peak RSS says nothing of it: the
    // GPU pool's high-water marks close every command that opened a GPU
    // (a recipe prints them per step and resets them: nothing is left to say at its end)
    if let Some((used, reserved)) = condenser::runtime::gpu_memory_peak_mb().filter(|m| m.1 > 0.0) {
        eprintln!("GPU memory: {used:.0} MB in use at most, {reserved:.0} MB held by the pool");
    }
    if let Err(e) = done {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
