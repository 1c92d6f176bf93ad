//! The rtsd daemon, built inside this package so compat tests get its path from Cargo
//! (`CARGO_BIN_EXE_rtsd-compat`) and always run the current code. The same entry point as the `rtsd` binary,
//! with the same built-in defaults (data is kept forever unless a test sets a retention).
fn main() -> std::process::ExitCode {
    rtsd::cli::main()
}
