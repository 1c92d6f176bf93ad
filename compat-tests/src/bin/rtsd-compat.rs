//! The rtsd daemon, built inside this package so compat tests get its path from Cargo
//! (`CARGO_BIN_EXE_rtsd-compat`) and always run the current code. Same entry point as the `rtsd` binary.
fn main() -> std::process::ExitCode {
    rtsd::cli::main()
}
