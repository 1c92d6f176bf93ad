//! Feeds arbitrary bytes to the `/api/put` and `/api/rollup` body parsers: they must never panic.
//! Run: `cd protocol/fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run put_json`
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = rtsd_protocol::json_put::parse_put_body(data);
    let _ = rtsd_protocol::json_put::parse_rollup_body(data);
});
