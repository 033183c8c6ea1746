//! The `condenser` binary: flag parsing and one library call per subcommand (src/cli).
mod cli;

fn main() {
    condenser::runtime::tune_allocator();
    if let Err(e) = cli::main() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
