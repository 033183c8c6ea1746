fn main() {
    if let Err(e) = condenser::cli::main() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
