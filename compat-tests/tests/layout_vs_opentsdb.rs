//! rtsd's storage against the real OpenTSDB 2.4.1 on HBase (issue 20 items 4 and 5), on one test bed (the
//! cluster starts once per test binary):
//!
//! 1. **Migration.** The differential suite's data set is written through OpenTSDB only, dumped with OpenTSDB's
//!    own tools (`tsdb uid grep`, `tsdb scan --import`) and loaded into a fresh rtsd with `rtsd uid assign` and
//!    `rtsd import`, by running the README's "Moving from OpenTSDB" commands as they are written (`tsdb` and
//!    `rtsd` on PATH are shims for `scripts/opentsdb-ref tool` and the workspace's binary). Then `rtsd scan
//!    --import` must print OpenTSDB's dump exactly, and the differential suite's queries (same seed, same case
//!    ids) must answer as 2.4.1 does, up to the differences listed in `compat-tests/differential/differences.json`.
//! 2. **Layout.** The migrated rtsd has OpenTSDB's UIDs, so the same names assigned in the same order get the same
//!    UIDs on both; the same telnet lines, `/api/put` bodies and annotations then go to both. Rows of a closed hour
//!    are compacted by OpenTSDB's own compaction queue, as it does when the TSD stops (`CompactionQueue.flush()`
//!    of every queued row of a closed hour). Its background flush is held off
//!    (`tsd.storage.compaction.min_flush_threshold` very high): for rows of a past hour it can run before
//!    asynchbase has sent their cells (seen: a row compacted with part of its cells, never queued again), while at
//!    shutdown everything written has long reached HBase. `tsdb fsck --fix --compact` is not used: 2.4.1's Fsck
//!    drops every integer that needs 8 bytes from the column it writes. `tsdb scan` (DumpSeries) and `rtsd scan`
//!    then print each row:
//!    row key, qualifiers and values as bytes, and must agree exactly, row by row. Rows of an open hour (a future
//!    hour: OpenTSDB never compacts it) hold OpenTSDB's individual cells, which must be exactly the cells of rtsd's
//!    compacted column. Differences are listed in differences.json under `layout/<metric>/<base time>` ids.
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rtsd_compat_tests::differential::*;
use rtsd_compat_tests::testbed::{root, Testbed};
use rtsd_compat_tests::Daemon;
use serde_json::{json, Value};

/// The closed hour the layout points go to (2023-07-22T04:00:00Z); the data set of the migration lies elsewhere.
const LH: i64 = 1_689_998_400;

/// The differential data set's metrics (`data_set`).
const DQ_METRICS: &[&str] = &["dq.cpu", "dq.counter", "dq.float", "dq.ms", "dq.sparse", "dq.big"];

/// Runs the workspace's rtsd binary (`rtsd-compat`) with `args`; panics with its output when it fails.
fn rtsd(args: &[&str]) -> String {
    let out = Command::new(rtsd_compat_tests::binary())
        .args(args)
        .env("NO_COLOR", "1")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .output()
        .expect("run rtsd");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "rtsd {args:?} failed: {stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout
}

/// `--set k=v` for each setting, for rtsd's tools on the daemon's data directory.
fn set_args(settings: &[(String, String)]) -> Vec<String> {
    settings.iter().flat_map(|(k, v)| ["--set".to_string(), format!("{k}={v}")]).collect()
}

/// `sum METRIC` for each metric: the query part of a `scan` command line.
fn scan_queries(metrics: &[&str]) -> Vec<String> {
    metrics.iter().flat_map(|m| ["sum".to_string(), m.to_string()]).collect()
}

/// The rows of a `tsdb scan` listing: the row's header line (key bytes, metric, base time, date, tags) and the
/// lines of its cells, by (metric, base time, header).
fn rows(dump: &str) -> BTreeMap<(String, i64, String), Vec<String>> {
    let mut out = BTreeMap::new();
    let mut current: Option<(String, i64, String)> = None;
    for line in dump.lines() {
        if line.starts_with('[') {
            // `[k, e, y] metric base (date) {tags}`
            let after = &line[line.find("] ").expect("row key") + 2..];
            let mut words = after.split(' ');
            let metric = words.next().unwrap().to_string();
            let base: i64 = words.next().unwrap().parse().expect("base time");
            let key = (metric, base, line.to_string());
            out.insert(key.clone(), Vec::new());
            current = Some(key);
        } else if let Some(key) = &current {
            out.get_mut(key).unwrap().push(line.to_string());
        } else {
            panic!("a cell line before any row: {line:?}");
        }
    }
    out
}

/// A row's cells as individual cells: a compacted column (`[q]\t[v] = N values:` and its indented points) becomes
/// its points, each as the single-cell line it stands for (spec: ingest §4.5, compaction concatenates the cells).
fn as_single_cells(cells: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for c in cells {
        if c.contains(" values:") {
            continue;
        }
        out.push(format!("  {}", c.trim_start()));
    }
    out
}

/// The bytes of the first `[...]` of a cell line (its qualifier).
fn qualifier(cell: &str) -> Vec<i64> {
    let inner = &cell[cell.find('[').unwrap() + 1..cell.find(']').unwrap()];
    inner.split(", ").map(|b| b.parse().unwrap()).collect()
}

/// Whether a row has at most one data column (compacted or a single cell): OpenTSDB's compaction queue is done
/// with it. Annotations (odd-length qualifiers starting with 1, spec: ingest §4.8) do not count.
fn compacted_row(cells: &[String]) -> bool {
    cells
        .iter()
        .filter(|c| c.starts_with("  [") && !c.starts_with("    "))
        .filter(|c| {
            let q = qualifier(c);
            !(q.len() % 2 == 1 && q[0] == 1)
        })
        .count()
        <= 1
}

/// Compacts OpenTSDB's closed hours the way 2.4.1 does when its TSD stops (see [`Testbed::restart_tsd`]) and
/// returns `tsdb scan ARGS`.
fn compact_and_dump(tb: &mut Testbed, args: &[&str]) -> String {
    // asynchbase sends buffered puts within tsd.storage.flush_interval (1 s): the compaction must find them.
    std::thread::sleep(Duration::from_millis(2500));
    let t = Instant::now();
    tb.restart_tsd();
    let dump = tb.tool("net.opentsdb.tools.DumpSeries", args);
    // Seen: 2.4.1's shutdown compacted some closed rows and left others (lay.int, lay.float) as single cells, with
    // nothing in its log; those rows are compared cell by cell (see `layout`).
    let dumped = rows(&dump);
    let left: Vec<&String> = dumped.iter().filter(|(_, c)| !compacted_row(c)).map(|(k, _)| &k.2).collect();
    eprintln!("layout_vs_opentsdb: rows OpenTSDB left uncompacted: {left:?}");
    eprintln!("layout_vs_opentsdb: TSD restarted (compacting) and rows dumped in {:.1}s", t.elapsed().as_secs_f64());
    dump
}

/// Writes `lines` and `version` on one telnet connection to `addr` and returns what came back before the version
/// reply (nothing, when every line was a good put).
fn telnet(addr: SocketAddr, lines: &str) -> String {
    Telnet::new(addr).exchange(lines.as_bytes())
}

// ---------------------------------------------------------------------------------------------------------------
// 1. Migration

/// `tsdb` and `rtsd` for the README's commands: OpenTSDB's tools through scripts/opentsdb-ref against the test
/// bed, and the workspace's rtsd with the daemon's settings.
fn shims(dir: &Path, tb: &Testbed, settings: &[(String, String)]) {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let tsdb = format!(
        "#!/usr/bin/env bash\n# `tsdb CMD ARGS` as OpenTSDB's script maps CMD to a tool class.\nset -e\n\
         case $1 in uid) c=net.opentsdb.tools.UidManager ;; scan) c=net.opentsdb.tools.DumpSeries ;; \
         import) c=net.opentsdb.tools.TextImporter ;; *) echo \"tsdb shim: no $1\" >&2; exit 2 ;; esac\n\
         shift\nTZ=UTC exec '{}/scripts/opentsdb-ref' tool '{}' \"$c\" \"$@\"\n",
        root().display(),
        tb.dir()
    );
    let sets: Vec<String> = set_args(settings).iter().map(|a| format!("'{a}'")).collect();
    let rtsd = format!(
        "#!/usr/bin/env bash\n# rtsd SUBCOMMAND with the test's settings.\nsub=$1\nshift\n\
         NO_COLOR=1 RUST_LOG=warn exec '{}' \"$sub\" {} \"$@\"\n",
        rtsd_compat_tests::binary().display(),
        sets.join(" ")
    );
    for (name, text) in [("tsdb", tsdb), ("rtsd", rtsd)] {
        let path = bin.join(name);
        std::fs::write(&path, text).unwrap();
        Command::new("chmod").arg("+x").arg(&path).status().unwrap();
    }
}

/// The `sh` block of README's "Moving from OpenTSDB" section.
fn readme_migration_commands() -> String {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    let section =
        readme.split("\n## Moving from OpenTSDB").nth(1).expect("README has a 'Moving from OpenTSDB' section");
    let section = section.split("\n## ").next().unwrap();
    let start = section.find("```sh\n").expect("a sh block in 'Moving from OpenTSDB'") + 6;
    let len = section[start..].find("```").expect("the block's end");
    section[start..start + len].to_string()
}

/// Writes the data set through OpenTSDB, migrates it with the README's commands into `rtsd` (stopped, and started
/// again on the migrated directory), and checks the dump and the differential queries.
fn migrate(tb: &Testbed, rtsd_daemon: Daemon, settings: &[(String, String)], work: &Path) -> Daemon {
    let t = Instant::now();
    let mut series = data_set(&mut Rng(DEFAULT_SEED));
    // Without the points 2.4.1's `tsdb scan` cannot read (a second 80-95 of its hour, see `quirk_0x05`).
    for s in &mut series {
        s.points.retain(|(ts, _)| !is_0x05_second(*ts));
    }
    let (assigns, bodies) = data_set_requests(&series);
    for (_, path) in &assigns {
        let r = tb.http("GET", path, "", Duration::from_secs(30));
        assert_eq!(r.status, 200, "{path}: {}", r.text());
    }
    let points: usize = series.iter().map(|s| s.points.len()).sum();
    for body in &bodies {
        let r = tb.http("POST", "/api/put?sync&details", body, Duration::from_secs(60));
        assert_eq!(r.status, 200, "/api/put: {}", r.text());
    }
    // Dumped as written (one cell per point, the TSD's compaction queue held off): the layout part below has
    // OpenTSDB compact rows. (Seen once with these rows compacted by 2.4.1 at shutdown: `tsdb scan` failed on a
    // compacted column of dq.cpu with another ArrayIndexOutOfBoundsException in Internal.extractDataPoints.)
    let written = t.elapsed();

    // The README's commands, in a directory of their own whose ./rtsd-data is the stopped daemon's directory.
    let mut daemon = rtsd_daemon;
    let status = daemon.terminate();
    assert!(status.success(), "rtsd did not stop cleanly: {status}");
    shims(work, tb, settings);
    std::os::unix::fs::symlink(daemon.data_dir(), work.join("rtsd-data")).unwrap();
    let commands = readme_migration_commands();
    let t = Instant::now();
    let out = Command::new("bash")
        .args(["-euo", "pipefail", "-c", &commands])
        .current_dir(work)
        .env("PATH", format!("{}:{}", work.join("bin").display(), std::env::var("PATH").unwrap_or_default()))
        .stdin(Stdio::null())
        .output()
        .expect("run the README's migration commands");
    assert!(
        out.status.success(),
        "README 'Moving from OpenTSDB' commands failed ({}):\n{commands}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let migrated = t.elapsed();
    let dump = std::fs::read_to_string(work.join("points.txt")).expect("points.txt from the README's commands");
    assert_eq!(dump.lines().count(), points, "tsdb scan --import printed one line per point written");

    // Every point came over exactly: rtsd prints OpenTSDB's dump, line for line (spec: ingest §6 import format).
    let dir = daemon.data_dir().to_str().unwrap().to_string();
    let mut scan = vec!["scan".to_string(), "--data-dir".into(), dir];
    scan.extend(set_args(settings));
    scan.push("--import".into());
    scan.push("1970/01/02".into());
    scan.extend(scan_queries(DQ_METRICS));
    let ours = rtsd(&scan.iter().map(String::as_str).collect::<Vec<_>>());
    // Line for line. A value may be spelled differently only where 2.4.1's JDK 17 Double.toString is not the
    // shortest round trip (e.g. 4.9E-324, where rtsd prints 5.0E-324): the same double, the formatting
    // difference differences.json lists for queries (query/get/...).
    // Sorted: the README's `tsdb scan` asks for the metrics in `uid grep`'s order, this scan in DQ_METRICS'.
    let (mut theirs, mut mine): (Vec<&str>, Vec<&str>) = (dump.lines().collect(), ours.lines().collect());
    theirs.sort_unstable();
    mine.sort_unstable();
    assert_eq!(
        mine.len(),
        theirs.len(),
        "rtsd scan --import has {} lines, tsdb scan --import {}",
        mine.len(),
        theirs.len()
    );
    let (mut spelled, mut wrong) = (0, Vec::new());
    for (a, b) in mine.iter().zip(&theirs) {
        if a == b {
            continue;
        }
        let (wa, wb): (Vec<&str>, Vec<&str>) = (a.split(' ').collect(), b.split(' ').collect());
        let same_double = wa.len() == wb.len()
            && wa.iter().zip(&wb).enumerate().all(|(i, (x, y))| i == 2 || x == y)
            && wa[2].parse::<f64>().ok().map(f64::to_bits) == wb[2].parse::<f64>().ok().map(f64::to_bits);
        if same_double {
            spelled += 1;
        } else {
            wrong.push(format!("rtsd:    {a}\nOpenTSDB: {b}"));
        }
    }
    eprintln!("migration: {} lines of tsdb scan --import, {spelled} with a double spelled differently", theirs.len());
    assert!(
        wrong.is_empty(),
        "rtsd scan --import after the migration differs:\n{}",
        wrong[..wrong.len().min(20)].join("\n")
    );

    // The same UIDs on both: OpenTSDB's `tsdb uid grep` and rtsd's list the same names with the same bytes.
    let theirs = tb.tool("net.opentsdb.tools.UidManager", &["grep", "."]);
    let mut uid = vec!["uid".to_string(), "--data-dir".into(), daemon.data_dir().to_str().unwrap().into()];
    uid.extend(set_args(settings));
    uid.extend(["grep".into(), ".".into()]);
    let mine = rtsd(&uid.iter().map(String::as_str).collect::<Vec<_>>());
    let named = |text: &str| {
        // OpenTSDB also lists its max-id counters (named by a NUL byte, 8-byte values); rtsd does not.
        let mut v: Vec<String> = text.lines().filter(|l| !l.contains('\0')).map(str::to_string).collect();
        v.sort();
        v
    };
    assert_eq!(named(&mine), named(&theirs), "uid grep after the migration");

    let daemon = daemon.restart();
    // The differential suite's queries: the migrated rtsd must answer exactly as an rtsd that received the same
    // points through /api/put (the differential suite's setting), so moving the data changes no answer; and it is
    // told how many answers equal 2.4.1's (the others are the query engine's differences, which the differential
    // suite lists; they are not the migration's).
    let direct = Daemon::start_with(&settings.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect::<Vec<_>>());
    for (_, path) in &assigns {
        let a = http_answer(direct.addr(), "GET", path, "");
        assert_eq!(a.0, 200, "{path}: {a:?}");
    }
    for body in &bodies {
        let a = http_answer(direct.addr(), "POST", "/api/put?sync&details", body);
        assert_eq!(a.0, 200, "/api/put: {a:?}");
    }
    let t = Instant::now();
    let cases = query_cases(DEFAULT_SEED, DEFAULT_CASES);
    let (mut same_as_direct, mut same_as_opentsdb) = (0, 0);
    let mut differ = Vec::new();
    for (id, method, path, body) in &cases {
        let migrated = http_answer(daemon.addr(), method, path, body);
        let written = http_answer(direct.addr(), method, path, body);
        let reference = http_answer(tb.tsd, method, path, body);
        if migrated == written {
            same_as_direct += 1;
        } else {
            differ.push(format!("{id}: {method} {path} {body}\n  migrated: {migrated:?}\n  direct:   {written:?}"));
        }
        same_as_opentsdb += usize::from(migrated == reference);
    }
    drop(direct);
    for d in differ.iter().take(20) {
        eprintln!("MIGRATION DIFFERENCE {d}");
    }
    eprintln!(
        "migration: {points} points written through OpenTSDB in {:.0}s; README commands (tsdb uid grep, tsdb scan \
         --import, rtsd uid assign, rtsd import) {:.1}s; {} queries in {:.0}s: {same_as_direct} answered as an rtsd \
         written directly, {same_as_opentsdb} exactly as OpenTSDB 2.4.1",
        written.as_secs_f64(),
        migrated.as_secs_f64(),
        cases.len(),
        t.elapsed().as_secs_f64(),
    );
    assert!(cases.len() > 600, "only {} queries", cases.len());
    assert!(differ.is_empty(), "{} queries answered differently after the migration (see above)", differ.len());
    // Most answers are 2.4.1's exactly; the rest are the query engine's listed differences (rollup path, double
    // formatting, ...), which tests/differential.rs checks one by one.
    assert!(same_as_opentsdb * 10 >= cases.len() * 8, "only {same_as_opentsdb} answers equal OpenTSDB's");
    daemon
}

/// Whether `ts` is a second timestamp at seconds 80-95 of its hour: its 2-byte qualifier starts with 0x05, the
/// prefix of an append column (spec: ingest §4.3, §4.7).
fn is_0x05_second(ts: i64) -> bool {
    ts <= u32::MAX as i64 && (80..96).contains(&ts.rem_euclid(3600))
}

/// 2.4.1's `tsdb scan` (DumpSeries, both forms) and its compaction cannot read a row holding a point at seconds
/// 80-95 of the hour: `Internal.extractDataPoints` takes any qualifier whose first byte is 0x05 for an append
/// column (it does not look at the length) and fails on it (ArrayIndexOutOfBoundsException or
/// IllegalDataException). The query path
/// reads such rows (the differential suite compares them). rtsd reads and dumps them; README "Moving from
/// OpenTSDB" says what to do. Checked here so the note cannot go stale.
fn quirk_0x05_lines() -> String {
    format!("put lay.quirk {} 46 host=a\nput lay.quirk {} 1 host=a\n", LH + 85, LH + 100)
}

fn quirk_0x05_opentsdb(tb: &Testbed) {
    let (start, end) = (LH.to_string(), (LH + 3600).to_string());
    let err = tb
        .try_tool("net.opentsdb.tools.DumpSeries", &["--import", &start, &end, "sum", "lay.quirk"])
        .expect_err("2.4.1's tsdb scan read a row with a point at second 85 of its hour");
    // Both exceptions were seen from the same lines in different runs: ArrayIndexOutOfBoundsException, and
    // IllegalDataException "Offset of [0] is out of bounds for the qualifier length of [1]" (the cell's value read as
    // an append record's qualifier).
    assert!(err.contains("ArrayIndexOutOfBoundsException") || err.contains("IllegalDataException: Offset of"), "{err}");
}

fn quirk_0x05_rtsd(scan: impl Fn(&[&str]) -> String) {
    let (start, end) = (LH.to_string(), (LH + 3600).to_string());
    let ours = scan(&["--import", &start, &end, "sum", "lay.quirk"]);
    assert_eq!(ours, format!("lay.quirk {} 46 host=a\nlay.quirk {} 1 host=a\n", LH + 85, LH + 100));
}

// ---------------------------------------------------------------------------------------------------------------
// 2. Layout

/// The telnet lines of the layout check (spec: ingest §4.2 value encodings, §4.3 qualifiers, §4.5 compaction).
fn layout_lines(open_hour: i64) -> String {
    let mut out = String::new();
    let mut put = |metric: &str, ts: i64, value: &str, tags: &str| {
        out.push_str(&format!("put {metric} {ts} {value} {tags}\n"));
    };
    // Integers of every width: 1, 2, 4 and 8 bytes, at each width's edges (spec: ingest §4.2).
    let ints = [
        "0",
        "1",
        "-1",
        "127",
        "-128",
        "128",
        "-129",
        "32767",
        "-32768",
        "32768",
        "-32769",
        "2147483647",
        "-2147483648",
        "2147483648",
        "-2147483649",
        "9223372036854775807",
        "-9223372036854775808",
    ];
    for (i, v) in ints.iter().enumerate() {
        put("lay.int", LH + 100 + 7 * i as i64, v, "host=a");
    }
    // A row with a single point: compaction leaves it as its one cell.
    put("lay.int", LH + 3600 + 42, "42", "host=a");
    // Floats: 4 bytes when the value fits a float exactly, else an 8-byte double (Tags.fitsInFloat, spec: ingest
    // §2.3); `1e3` is a float too (not integer syntax), `-0.0` a float with the sign bit.
    for (i, v) in
        ["1.5", "0.1", "-2.25", "3.4028235E38", "1.0E-45", "12.3", "0.5", "-0.0", "1e3", "100"].iter().enumerate()
    {
        put("lay.float", LH + 300 + 11 * i as i64, v, "host=a");
    }
    // Milliseconds: 4-byte qualifiers, sorted after the second ones within a row (spec: ingest §4.3).
    for (ms, v) in [(1, "1"), (999, "-7"), (1000, "2.5"), (1500, "300"), (3_599_999, "0.1")] {
        put("lay.ms", LH * 1000 + ms, v, "host=a dc=x");
    }
    // Seconds and milliseconds in one row: the compacted value ends with the mixed flag byte 1 (spec: ingest §4.5).
    for (ts, v) in [(LH + 5, "5"), (LH * 1000 + 5500, "55"), (LH + 10, "1.5"), (LH * 1000 + 12_345, "70000")] {
        put("lay.mixed", ts, v, "host=a");
    }
    // Tag pairs sorted by tag key UID in the row key (spec: ingest §4.1), whatever the line's order.
    put("lay.tags", LH + 1, "1", "env=prod host=b dc=y cpu=0");
    put("lay.tags", LH + 2, "2", "cpu=0 dc=y host=b env=prod");
    // An open hour: OpenTSDB keeps each cell until the hour is closed.
    for (ts, v) in
        [(open_hour + 1, "1"), (open_hour + 2, "0.1"), (open_hour * 1000 + 2500, "-129"), (open_hour + 3599, "1.5")]
    {
        put("lay.open", ts, v, "host=a");
    }
    put("lay.annot", LH + 1, "1", "host=a");
    // Second offsets 80-95 (qualifier byte 0x05) are left out above: see quirk_0x05_opentsdb.
    out.push_str(&quirk_0x05_lines());
    out
}

/// The names of the layout check in first-use order (each assigned alone, so the UIDs follow this order).
fn layout_names(lines: &str) -> Vec<(&'static str, String)> {
    let mut names: Vec<(&'static str, String)> = Vec::new();
    let mut add = |kind: &'static str, name: &str| {
        if !names.iter().any(|(k, n)| *k == kind && n == name) {
            names.push((kind, name.to_string()));
        }
    };
    for line in lines.lines().chain(["put lay.http 0 0 host=a", "put lay.http.float 0 0 host=a"]) {
        let words: Vec<&str> = line.split(' ').collect();
        add("metric", words[1]);
        for tag in &words[4..] {
            let (k, v) = tag.split_once('=').unwrap();
            add("tagk", k);
            add("tagv", v);
        }
    }
    names
}

/// The UID both servers gave `name` (hex), from `/api/uid/assign`'s "already exists" answer.
fn uid(rtsd_addr: SocketAddr, tb: &Testbed, kind: &str, name: &str) -> String {
    let answer = both(rtsd_addr, tb, "GET", &format!("/api/uid/assign?{kind}={name}"), "");
    let v: Value = serde_json::from_str(answer.split_once(' ').unwrap().1).expect("JSON");
    let text = v[format!("{kind}_errors")][name].as_str().unwrap_or_else(|| panic!("{kind} {name}: {answer}"));
    text.rsplit(' ').next().unwrap().to_string()
}

/// Both servers' answers must be identical (the same bytes were sent).
fn both(rtsd_addr: SocketAddr, tb: &Testbed, method: &str, path: &str, body: &str) -> String {
    let a = http_answer(rtsd_addr, method, path, body);
    let b = http_answer(tb.tsd, method, path, body);
    assert_eq!(a.0, b.0, "{method} {path} {body}: rtsd {a:?}, OpenTSDB {b:?}");
    format!("{} {}", b.0, b.2)
}

fn layout(tb: &mut Testbed, mut daemon: Daemon, settings: &[(String, String)]) {
    let open_hour =
        (std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64 / 3600 + 3)
            * 3600;
    let lines = layout_lines(open_hour);
    for (kind, name) in layout_names(&lines) {
        let answer = both(daemon.addr(), tb, "GET", &format!("/api/uid/assign?{kind}={name}"), "");
        // Names the data set brought already have their (same) UID on both.
        assert!(answer.starts_with("200 ") || answer.contains("Name already exists"), "assign {kind} {name}: {answer}");
    }
    for addr in [daemon.addr(), tb.tsd] {
        assert_eq!(telnet(addr, &lines), "", "telnet put errors from {addr}");
    }
    // /api/put: 2.4.1 stores every non-integer as an 8-byte double over HTTP (listed as layout/lay.http.float);
    // rtsd applies the telnet rule. Integers and a value that needs a double agree.
    let http = json!([
        {"metric":"lay.http","timestamp":LH + 1,"value":7,"tags":{"host":"a"}},
        {"metric":"lay.http","timestamp":LH + 2,"value":0.1,"tags":{"host":"a"}},
        {"metric":"lay.http","timestamp":LH + 3,"value":70000,"tags":{"host":"a"}},
        {"metric":"lay.http","timestamp":LH * 1000 + 4500,"value":"-5","tags":{"host":"a"}},
        {"metric":"lay.http.float","timestamp":LH + 1,"value":2.5,"tags":{"host":"a"}}
    ]);
    let answer = both(daemon.addr(), tb, "POST", "/api/put?sync&details", &http.to_string());
    assert_eq!(answer, r#"200 {"success":5,"failed":0,"errors":[]}"#);
    // Annotations: a second start (2-byte offset), a millisecond start (4-byte offset), custom keys out of order
    // (2.4.1 stores them sorted); and a second start divisible by 1000, which 2.4.1 misplaces (listed as
    // layout/lay.annot/...; README, Storage). spec: ingest §4.8
    let tsuid = |metric: &str| {
        format!(
            "{}{}{}",
            uid(daemon.addr(), tb, "metric", metric),
            uid(daemon.addr(), tb, "tagk", "host"),
            uid(daemon.addr(), tb, "tagv", "a")
        )
    };
    let int_tsuid = tsuid("lay.int");
    let annotations = [
        json!({"tsuid": int_tsuid, "startTime": LH + 808, "description": "deploy", "custom": {"b": "2", "a": "1"}}),
        json!({"tsuid": int_tsuid, "startTime": LH * 1000 + 1_234_567, "notes": "ms", "endTime": LH + 1300}),
    ];
    for a in &annotations {
        let answer = both(daemon.addr(), tb, "POST", "/api/annotation", &a.to_string());
        assert!(answer.starts_with("200 "), "annotation {a}: {answer}");
    }
    let tsuid = tsuid("lay.annot");
    let odd = json!({"tsuid": tsuid, "startTime": 1_689_999_000, "description": "divisible by 1000"});
    let answer = both(daemon.addr(), tb, "POST", "/api/annotation", &odd.to_string());
    assert!(answer.starts_with("200 "), "annotation {odd}: {answer}");

    let metrics =
        ["lay.int", "lay.float", "lay.ms", "lay.mixed", "lay.tags", "lay.http", "lay.http.float", "lay.annot"];
    let (start, end) = ((LH - 3600).to_string(), (LH + 7200).to_string());
    let mut args = vec![start.as_str(), end.as_str()];
    let queries = scan_queries(&metrics);
    args.extend(queries.iter().map(String::as_str));
    let theirs = compact_and_dump(tb, &args);
    quirk_0x05_opentsdb(tb);
    let (ostart, oend) = ((open_hour - 3600).to_string(), (open_hour + 3600).to_string());
    let theirs_open = tb.tool("net.opentsdb.tools.DumpSeries", &[&ostart, &oend, "sum", "lay.open"]);

    // rtsd's dump of its stopped data directory: every acknowledged point is in RocksDB.
    let status = daemon.terminate();
    assert!(status.success(), "rtsd did not stop cleanly: {status}");
    let dir = daemon.data_dir().to_str().unwrap().to_string();
    let scan = |args: &[&str]| {
        let mut all = vec!["scan".to_string(), "--data-dir".into(), dir.clone()];
        all.extend(set_args(settings));
        all.extend(args.iter().map(|a| a.to_string()));
        rtsd(&all.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let ours = scan(&args);
    quirk_0x05_rtsd(scan);
    let ours_open = scan(&[&ostart, &oend, "sum", "lay.open"]);

    let mut tally = Tally::load(|id| id.starts_with(LAYOUT_PREFIX));
    let (mine, other) = (rows(&ours), rows(&theirs));
    assert_eq!(
        mine.keys().map(|k| &k.2).collect::<Vec<_>>(),
        other.keys().map(|k| &k.2).collect::<Vec<_>>(),
        "the same rows (row key bytes, metric, base time, tags) on both"
    );
    let (mut cells, mut whole_rows) = (0, 0);
    for ((metric, base, header), theirs) in &other {
        let ours = &mine[&(metric.clone(), *base, header.clone())];
        cells += theirs.len();
        if compacted_row(theirs) {
            // Compacted by OpenTSDB: the whole row, compacted column bytes included.
            whole_rows += 1;
            tally.record(&format!("{LAYOUT_PREFIX}{metric}/{base}"), header, &ours.join("\n"), &theirs.join("\n"));
        } else {
            // Left as single cells: exactly rtsd's cells (sorted: HBase's qualifier order vs time order).
            let mut a = as_single_cells(ours);
            let mut b = theirs.clone();
            a.sort();
            b.sort();
            tally.record(&format!("{LAYOUT_PREFIX}cells/{metric}/{base}"), header, &a.join("\n"), &b.join("\n"));
        }
    }
    eprintln!("layout: {whole_rows} rows compacted by OpenTSDB compared whole");
    assert!(whole_rows >= 2, "OpenTSDB compacted only {whole_rows} rows: the compacted columns went unchecked");
    let (mine, other) = (rows(&ours_open), rows(&theirs_open));
    assert_eq!(mine.len(), 1, "one open row:\n{ours_open}");
    assert_eq!(mine.keys().collect::<Vec<_>>(), other.keys().collect::<Vec<_>>(), "the open row's key");
    for (key, theirs) in &other {
        // HBase lists a row's cells in qualifier byte order, a compacted column holds them in time order (ms
        // cells sort after second cells in the former): the same cells, compared as sorted lists.
        let mut ours = as_single_cells(&mine[key]);
        ours.sort();
        let mut theirs = theirs.clone();
        theirs.sort();
        assert_eq!(theirs.len(), 4, "OpenTSDB keeps the open hour's 4 cells apart:\n{theirs_open}");
        cells += theirs.len();
        tally.record(&format!("{LAYOUT_PREFIX}open/{}", key.0), &key.2, &ours.join("\n"), &theirs.join("\n"));
    }
    let stale: Vec<String> =
        tally.entries.iter().filter(|e| e.hits == 0 || !e.agreed.is_empty()).map(|e| e.id.clone()).collect();
    let report_path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("layout-new.json");
    tally.write_report(&report_path);
    for (id, req, a, b) in tally.new.iter().chain(&tally.changed) {
        eprintln!("LAYOUT DIFFERENCE {id}\n  row: {req}\n  rtsd:\n{a}\n  opentsdb:\n{b}");
    }
    eprintln!(
        "layout: {} rows ({cells} cell lines) compared byte for byte: {} identical, {} listed differences, {} new, {} \
         changed, stale list entries {stale:?} (new ones written to {})",
        tally.compared,
        tally.identical,
        tally.listed,
        tally.new.len(),
        tally.changed.len(),
        report_path.display()
    );
    assert!(tally.compared >= 9, "only {} rows compared", tally.compared);
    assert!(
        tally.new.is_empty() && tally.changed.is_empty() && stale.is_empty(),
        "layout differences against OpenTSDB 2.4.1 (see above; listed ones go in differences.json as layout/...)"
    );
}

#[test]
fn storage_layout_and_migration_against_opentsdb_2_4_1() {
    let started = Instant::now();
    let mut tb = Testbed::start_with("layout", &[("tsd.storage.compaction.min_flush_threshold", "100000000")]);
    let settings = tb.rtsd_settings();
    let daemon = Daemon::start_with(&settings.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect::<Vec<_>>());
    let work = tempfile::tempdir().unwrap();
    let daemon = migrate(&tb, daemon, &settings, work.path());
    layout(&mut tb, daemon, &settings);
    eprintln!("layout_vs_opentsdb: {:.0}s in all", started.elapsed().as_secs_f64());
}
