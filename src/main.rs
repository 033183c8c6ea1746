//! The `condenser` binary: flag parsing and one library call per subcommand (src/cli).
mod cli;

fn main() {
    condenser::runtime::tune_allocator();
    // the BLAS settles its environment (kernel, pool sizes) while this process has one thread
    let _ = condenser::model::kernels::blas::blas();
    if let Err(e) = cli::main() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
