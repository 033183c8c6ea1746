fn main() {
    condenser::runtime::tune_allocator();
    if let Err(e) = condenser::cli::main() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
