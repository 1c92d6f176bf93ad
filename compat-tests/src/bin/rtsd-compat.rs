//! The rtsd daemon, built inside this package so compat tests get its path from Cargo
//! (`CARGO_BIN_EXE_rtsd-compat`) and always run the current code. Same entry point as the `rtsd` binary, except
//! that data is kept forever unless a test sets a retention (the spec's vectors are from 2013).
fn main() -> std::process::ExitCode {
    rtsd::cli::main_with_defaults(rtsd::config::TEST_DEFAULTS)
}
