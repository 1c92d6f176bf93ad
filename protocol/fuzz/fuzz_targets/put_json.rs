//! Feeds arbitrary bytes to the `/api/put` and `/api/rollup` body parsers: they must never panic, and wherever the
//! plain-body reader answers, the general reader must answer the same points.
//! Run: `cd protocol/fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run put_json`
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    use rtsd_protocol::json_put::{parse_plain_put_body, parse_put_body, BodyPoint};
    let general = parse_put_body(data);
    if let Some(plain) = parse_plain_put_body(data) {
        let points: Vec<BodyPoint<'_>> = plain.points.iter().map(|p| BodyPoint::Point(plain.incoming(p))).collect();
        assert_eq!(Ok(points), general);
    }
    let _ = rtsd_protocol::json_put::parse_rollup_body(data);
});
