//! Feeds arbitrary bytes through the telnet framing and `put` parser: they must never panic.
//! Run: `cd protocol/fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run put_line`
#![no_main]
use libfuzzer_sys::fuzz_target;
use rtsd_protocol::point::Rules;
use rtsd_protocol::telnet::{next_line, parse_command, parse_put, Command};

fuzz_target!(|data: &[u8]| {
    let rules = Rules::default();
    let mut rest = data;
    while let Some((line, used)) = next_line(rest) {
        if let Command::Put(words) = parse_command(line) {
            let _ = parse_put(&words, &rules);
        }
        rest = &rest[used..];
    }
});
