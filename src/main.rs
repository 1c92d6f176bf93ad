//! The `rtsd` binary; everything lives in the library so tests can run the very same entry point.
fn main() -> std::process::ExitCode {
    rtsd::cli::main()
}
