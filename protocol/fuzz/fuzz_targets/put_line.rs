//! Feeds arbitrary bytes through the telnet framing and the `put` and `rollup` parsers: they must never panic.
//! Run: `cd protocol/fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run put_line`
#![no_main]
use libfuzzer_sys::fuzz_target;
use rtsd_protocol::point::Rules;
use rtsd_protocol::telnet::{next_line, parse_command, parse_put, parse_rollup, Command};

fuzz_target!(|data: &[u8]| {
    let rules = Rules::default();
    let mut rest = data;
    while let Some((line, used)) = next_line(rest) {
        match parse_command(line) {
            Command::Put(words) => {
                let _ = parse_put(&words, &rules);
            }
            Command::Rollup(words) => {
                let _ = parse_rollup(&words);
            }
            _ => {}
        }
        rest = &rest[used..];
    }
});
