//! A telnet connection remembers the series it has written so repeated lines skip name lookups; every error a
//! repeated series can still provoke must come back exactly as for a new one (spec: ingest §2.6).
use rtsd_compat_tests::{barrier, Daemon};
use std::io::Write;

#[test]
fn repeated_series_still_get_every_timestamp_and_value_error() {
    let d = Daemon::start();
    let mut t = d.telnet();
    let lines = "put m 1365465600 1 host=a dc=x\n\
                 put m 1365465601 2 host=a dc=x\n\
                 put m notatime 3 host=a dc=x\n\
                 put m 0 3 host=a dc=x\n\
                 put m 1365465602  host=a dc=x\n\
                 put m 1365465602 NaN host=a dc=x\n\
                 put m 1365465602 1e999 host=a dc=x\n\
                 put m 10000000000000 3 host=a dc=x\n\
                 put m 1365465603.250 4.5 host=a dc=x\n\
                 put m 1365465604 5 host=a  dc=x\n\
                 put m 1365465605 6 dc=x host=a\n";
    t.write_all(lines.as_bytes()).unwrap();
    assert_eq!(
        barrier(&mut t),
        vec![
            "put: invalid value: Invalid character 'n' in notatime\n",
            "put: illegal argument: invalid timestamp: 0\n",
            "put: illegal argument: empty value\n",
            "put: invalid value: Invalid character 'N' in NaN\n",
            "put: illegal argument: value is NaN or Infinite: Infinity for metric=m timestamp=1365465602\n",
            // Java's HashMap puts `host` (bucket 8) before `dc` (bucket 15).
            "put: illegal argument: bad timestamp=10000000000000 when trying to add value=[3]/0 to metric=m, tags={host=a, dc=x}\n",
        ]
    );
    assert_eq!(
        d.scan(&["1365465600", "1365469200", "sum", "m"]),
        vec![
            "m 1365465600 1 dc=x host=a",
            "m 1365465601 2 dc=x host=a",
            "m 1365465603250 4.5 dc=x host=a",
            "m 1365465604 5 dc=x host=a",
            "m 1365465605 6 dc=x host=a",
        ]
    );
}

#[test]
fn dropcaches_makes_connections_resolve_names_again() {
    let d = Daemon::start();
    let mut t = d.telnet();
    t.write_all(b"put m 1365465600 1 host=a\ndropcaches\nput m 1365465601 2 host=a\n").unwrap();
    assert_eq!(barrier(&mut t), vec!["Caches dropped.\n"]);
    assert_eq!(
        d.scan(&["1365465600", "1365469200", "sum", "m"]),
        vec!["m 1365465600 1 host=a", "m 1365465601 2 host=a"]
    );
}
