//! OpenTSDB's `tsdb` command-line tools as `rtsd` subcommands (`import`, `query`, `scan`, `uid`, `mkmetric`,
//! `fsck`), run as processes on a data directory the daemon wrote and then released, the way an operator runs
//! them; and `import` through a running daemon.
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

use rtsd::config::Config;
use rtsd::metrics::Metrics;
use rtsd::store::Store;
use rtsd_compat_tests::{binary, normalize, Daemon};

#[test]
fn the_binary_is_the_one_cargo_built() {
    assert_eq!(binary(), Path::new(env!("CARGO_BIN_EXE_rtsd-compat")));
}

/// Runs `rtsd-compat SUBCOMMAND --data-dir DIR ARGS...`; returns (exit code, stdout, stderr).
fn tool(dir: &Path, subcommand: &str, args: &[&str]) -> (i32, String, String) {
    tool_with(dir, subcommand, &[], args)
}

fn tool_with(dir: &Path, subcommand: &str, flags: &[&str], args: &[&str]) -> (i32, String, String) {
    let out = Command::new(binary())
        .arg(subcommand)
        .arg("--data-dir")
        .arg(dir)
        .args(flags)
        .args(args)
        .env("NO_COLOR", "1")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("run the tool");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A daemon that wrote `lines` (telnet puts) and stopped, leaving its data directory to the tools.
fn stopped_daemon_with(lines: &str) -> Daemon {
    let mut d = Daemon::start();
    if !lines.is_empty() {
        d.put_lines(lines);
    }
    stop(&mut d);
    d
}

/// SIGTERM and wait. The exit status is not asserted: a SIGTERM that arrives right after `rtsd ready`, before
/// the daemon has installed its handler, ends it by the signal's default action (the daemon's race, not the
/// tools'); every acknowledged point is in the write-ahead log either way, which is all the tools need.
fn stop(d: &mut Daemon) {
    let _ = d.terminate();
}

fn lines(s: &str) -> Vec<String> {
    s.lines().map(str::to_string).collect()
}

const RANGE: [&str; 2] = ["1356998400", "1357005600"];

fn scan_import(dir: &Path, metric: &str) -> Vec<String> {
    let (code, out, err) = tool_with(dir, "scan", &["--import"], &[RANGE[0], RANGE[1], "sum", metric]);
    assert_eq!(code, 0, "{err}");
    normalize(out.lines())
}

#[test]
fn import_reports_each_bad_line_with_file_and_line_and_a_summary() {
    let d = stopped_daemon_with("put sys.cpu.user 1356998400 1 host=web01\n");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("points.txt");
    std::fs::write(
        &file,
        "sys.cpu.user 1356998400 42 host=web01\n\
         sys.cpu.user 1356998460 43.5 host=web01\n\
         sys.cpu.user 1356998520 x host=web01\n\
         sys.cpu.user 1356998580\n\
         \n\
         sys.cpu.user 1356998640 45 host=web01 host=web02\n\
         sys.cpu.user 1356998400500 7 host=web02\r\n\
         sys.cpu.user 1356998700 46 host=web#01\n",
    )
    .unwrap();
    let f = file.display().to_string();

    // Without --skip-errors the first bad line stops the import; what came before it is written.
    let (code, _, err) = tool(d.data_dir(), "import", &[&f]);
    assert_eq!(code, 1, "{err}");
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with(&f)).collect();
    assert_eq!(errors, vec![format!("{f}:3: invalid value: Invalid character 'x' in x")]);
    assert!(err.contains(&format!("Processed {f} in ")), "{err}");
    assert!(err.contains(", 2 data points ("), "{err}");
    assert!(
        err.contains(&format!("import stopped at the bad line {f}:3; the 2 data points before it are written")),
        "{err}"
    );
    assert_eq!(
        scan_import(d.data_dir(), "sys.cpu.user"),
        normalize(["sys.cpu.user 1356998400 42 host=web01", "sys.cpu.user 1356998460 43.5 host=web01"])
    );

    // With --skip-errors every bad line is reported and skipped; the rest is imported, and the summary counts.
    let (code, _, err) = tool_with(d.data_dir(), "import", &["--skip-errors"], &[&f]);
    assert_eq!(code, 0, "{err}");
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with(&f)).collect();
    assert_eq!(
        errors,
        vec![
            format!("{f}:3: invalid value: Invalid character 'x' in x"),
            format!("{f}:4: illegal argument: not enough arguments (need least 4, got 2)"),
            format!("{f}:6: illegal argument: duplicate tag: host=web02, tags={{host=web01}}"),
            format!("{f}:8: illegal argument: Invalid tag value with key [host] (\"web#01\"): illegal character: #"),
        ]
    );
    assert!(err.contains(", 3 data points ("), "{err}");
    assert!(err.contains("Total: imported 3 data points in "), "{err}");
    assert!(err.contains(", 4 bad lines skipped"), "{err}");
    assert_eq!(
        scan_import(d.data_dir(), "sys.cpu.user"),
        normalize([
            "sys.cpu.user 1356998400 42 host=web01",
            "sys.cpu.user 1356998460 43.5 host=web01",
            "sys.cpu.user 1356998400500 7 host=web02",
        ])
    );

    // The imported points are the daemon's data like any other.
    let d = d.restart();
    let r = d.http("GET", "/api/query?start=1356998400&end=1356999000&m=sum:sys.cpu.user%7Bhost=web01%7D", &[], b"");
    assert_eq!(r.status, 200, "{}", r.text());
    // (whether 42 prints as 42 or 42.0 next to a float is the query engine's business, not the importer's)
    assert!(
        r.text().contains(r#""dps":{"1356998400":42"#) && r.text().contains(r#","1356998460":43.5}"#),
        "{}",
        r.text()
    );
}

#[test]
fn gzip_import_and_a_rerun_duplicate_nothing() {
    let d = stopped_daemon_with("");
    let dir = tempfile::tempdir().unwrap();
    let gz = dir.path().join("points.txt.gz");
    let mut text = String::new();
    for h in 0..5 {
        for i in 0..200 {
            let v = if i % 3 == 0 { format!("{}.25", i) } else { (h * 1000 + i).to_string() };
            text.push_str(&format!("gz.metric {} {v} host=h{h} dc=dc{}\n", 1356998400 + i * 30, h % 2));
        }
    }
    let mut enc = flate2::write::GzEncoder::new(std::fs::File::create(&gz).unwrap(), flate2::Compression::default());
    enc.write_all(text.as_bytes()).unwrap();
    enc.finish().unwrap();
    let g = gz.display().to_string();

    let (code, _, err) = tool(d.data_dir(), "import", &[&g]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("Total: imported 1000 data points in "), "{err}");
    let first = scan_import(d.data_dir(), "gz.metric");
    assert_eq!(first, normalize(text.lines()));

    // Interrupted or not, running the same import again writes every point to the cell it already has.
    let (code, _, err) = tool(d.data_dir(), "import", &[&g]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(scan_import(d.data_dir(), "gz.metric"), first);
    let (code, out, err) = tool_with(d.data_dir(), "fsck", &["--full-scan"], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("Duplicate Datapoints: 0\n") && out.contains("Valid Datapoints: 1000\n"), "{out}");
}

#[test]
fn query_prints_as_tsdb_query_does() {
    let d = stopped_daemon_with(
        "put sys.cpu.user 1356998400 42 host=web01\n\
         put sys.cpu.user 1356998460 43 host=web01\n\
         put sys.cpu.user 1356998520 45 host=web01\n\
         put sys.cpu.user 1356998400 10.5 host=web02\n\
         put sys.cpu.user 1356998460 11.25 host=web02\n\
         put sys.cpu.user 1356998520 12 host=web02\n",
    );
    let q = |args: &str| {
        let args: Vec<&str> = args.split(' ').collect();
        let (code, out, err) = tool(d.data_dir(), "query", &args);
        assert_eq!(code, 0, "{args:?}: {err}");
        lines(&out)
    };
    // `metric timestamp(ms) value {tags}`: longs as they are, doubles with %f.
    assert_eq!(
        q("1356998400 1356998600 sum sys.cpu.user host=web01"),
        [
            "sys.cpu.user 1356998400000 42 {host=web01}",
            "sys.cpu.user 1356998460000 43 {host=web01}",
            "sys.cpu.user 1356998520000 45 {host=web01}",
        ]
    );
    assert_eq!(
        q("1356998400 1356998600 sum sys.cpu.user"),
        [
            "sys.cpu.user 1356998400000 52.500000 {}",
            "sys.cpu.user 1356998460000 54.250000 {}",
            "sys.cpu.user 1356998520000 57 {}",
        ]
    );
    assert_eq!(
        q("1356998400 1356998600 sum rate sys.cpu.user host=web01"),
        ["sys.cpu.user 1356998460000 0.016667 {host=web01}", "sys.cpu.user 1356998520000 0.033333 {host=web01}"]
    );
    // downsample N FUNC: N in milliseconds. Two queries on one command line print one after the other.
    assert_eq!(
        q("1356998400 1356998600 max downsample 120000 avg sys.cpu.user sum sys.cpu.user host=web02"),
        [
            "sys.cpu.user 1356998400000 42.500000 {}",
            "sys.cpu.user 1356998520000 45.000000 {}",
            "sys.cpu.user 1356998400000 10.500000 {host=web02}",
            "sys.cpu.user 1356998460000 11.250000 {host=web02}",
            "sys.cpu.user 1356998520000 12 {host=web02}",
        ]
    );
    // The same numbers as /api/query.
    let d = d.restart();
    let r = d.http("GET", "/api/query?start=1356998400&end=1356998600&m=sum:sys.cpu.user", &[], b"");
    assert!(r.text().contains(r#""dps":{"1356998400":52.5,"1356998460":54.25,"1356998520":57}"#), "{}", r.text());
    let mut d = d;
    stop(&mut d);
    let (code, _, err) = tool(d.data_dir(), "query", &["1356998400", "sum", "no.such.metric"]);
    assert_eq!((code, err.trim()), (1, "rtsd: No such name for 'metrics': 'no.such.metric'"));
}

#[test]
fn scan_prints_rows_and_cells_and_deletes() {
    let d = stopped_daemon_with(
        "put scan.m 1356998400 42 host=web01\n\
         put scan.m 1356998460 1.5 host=web01\n\
         put scan.m 1356998400500 7 host=web02\n\
         put other.m 1356998400 1 host=web01\n",
    );
    let (code, out, err) = tool(d.data_dir(), "scan", &[RANGE[0], RANGE[1], "sum", "scan.m"]);
    assert_eq!(code, 0, "{err}");
    // UIDs: scan.m 1, host 1, web01 1, web02 2 (other.m 2).
    assert_eq!(
        lines(&out),
        [
            "[0, 0, 1, 80, -30, 39, 0, 0, 0, 1, 0, 0, 1] scan.m 1356998400 (Tue Jan 01 00:00:00 UTC 2013) {host=web01}",
            "  [0, 0, 3, -53]\t[42, 63, -64, 0, 0, 0] = 2 values:",
            "    [0, 0]\t[42]\t0\tl\t1356998400\t(Tue Jan 01 00:00:00 UTC 2013)",
            "    [3, -53]\t[63, -64, 0, 0]\t60\tf\t1356998460\t(Tue Jan 01 00:01:00 UTC 2013)",
            "[0, 0, 1, 80, -30, 39, 0, 0, 0, 1, 0, 0, 2] scan.m 1356998400 (Tue Jan 01 00:00:00 UTC 2013) {host=web02}",
            "  [-16, 0, 125, 0]\t[7]\t500\tl\t1356998400500\t(Tue Jan 01 00:00:00 UTC 2013)",
        ]
    );
    let (code, out, err) =
        tool_with(d.data_dir(), "scan", &["--delete"], &[RANGE[0], RANGE[1], "sum", "scan.m", "host=web02"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(lines(&out), ["scan.m 1356998400500 7 host=web02"]);
    assert!(err.contains("deleted 1 rows (1 data points)"), "{err}");
    assert_eq!(
        scan_import(d.data_dir(), "scan.m"),
        normalize(["scan.m 1356998400 42 host=web01", "scan.m 1356998460 1.5 host=web01"])
    );
    assert_eq!(scan_import(d.data_dir(), "other.m"), ["other.m 1356998400 1 host=web01"]);
}

#[test]
fn scan_and_fsck_show_a_packed_closed_hour_as_opentsdb_cells() {
    // 30 points of a closed hour: rtsd stores the row packed (issue 7 item 4); the tools must still show and check
    // OpenTSDB's compacted column, byte for byte.
    let puts: String = (0..30).map(|i| format!("put pack.m {} {} host=web01\n", 1356998400 + i * 10, i * 3)).collect();
    let d = stopped_daemon_with(&puts);
    let dir = d.data_dir();
    {
        let s = open_store(dir);
        // The daemon's writes are merge operands until a compaction merges them, and only what a compaction
        // writes is packed (a read's merge is not): compact what the daemon left in level 0, as it would.
        s.compact_written().unwrap();
        let mut values = Vec::new();
        s.scan_raw(rtsd::store::CF_DATA, &[], |_, v| {
            values.push(v.to_vec());
            true
        })
        .unwrap();
        assert_eq!(values.len(), 1);
        // A packed row's first column has the empty qualifier: its first byte (the qualifier's length) is 0.
        assert_eq!(values[0].first(), Some(&0), "the closed hour is stored packed");
    }
    let byte_list = |bytes: &[u8]| {
        let parts: Vec<String> = bytes.iter().map(|&b| (b as i8).to_string()).collect();
        format!("[{}]", parts.join(", "))
    };
    let (mut quals, mut vals) = (Vec::new(), Vec::new());
    let mut cells = Vec::new();
    for i in 0..30u16 {
        let (q, v) = (((i * 10) << 4).to_be_bytes(), [(i * 3) as u8]);
        quals.extend_from_slice(&q);
        vals.extend_from_slice(&v);
        let (o, ts) = (i * 10, 1356998400 + u32::from(i) * 10);
        cells.push(format!(
            "    {}\t{}\t{o}\tl\t{ts}\t(Tue Jan 01 00:{:02}:{:02} UTC 2013)",
            byte_list(&q),
            byte_list(&v),
            o / 60,
            o % 60
        ));
    }
    vals.push(0);
    let mut expected = vec![
        "[0, 0, 1, 80, -30, 39, 0, 0, 0, 1, 0, 0, 1] pack.m 1356998400 (Tue Jan 01 00:00:00 UTC 2013) {host=web01}"
            .to_string(),
        format!("  {}\t{} = 30 values:", byte_list(&quals), byte_list(&vals)),
    ];
    expected.extend(cells);
    let (code, out, err) = tool(dir, "scan", &[RANGE[0], RANGE[1], "sum", "pack.m"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(lines(&out), expected);
    assert_eq!(
        scan_import(dir, "pack.m"),
        normalize((0..30).map(|i| format!("pack.m {} {} host=web01", 1356998400 + i * 10, i * 3)))
    );
    // fsck checks the cells the packed column stands for: no error, nothing to fix, nothing rewritten.
    for flags in [&["--full-scan"][..], &["--full-scan", "--fix-all"]] {
        let (code, out, err) = tool_with(dir, "fsck", flags, &[]);
        assert_eq!(code, 0, "{out}{err}");
        assert!(out.contains("Valid Datapoints: 30\n") && out.contains("Total Errors: 0\n"), "{out}");
    }
    assert_eq!(tool(dir, "scan", &[RANGE[0], RANGE[1], "sum", "pack.m"]).1, out);
}

#[test]
fn mkmetric_and_uid_assign_grep_lookup_delete() {
    let d = stopped_daemon_with("put sys.cpu.user 1356998400 1 host=web01\n");
    let dir = d.data_dir();
    let (code, out, err) = tool(dir, "mkmetric", &["sys.cpu.nice", "sys.mem.free"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(lines(&out), ["metrics sys.cpu.nice: [0, 0, 2]", "metrics sys.mem.free: [0, 0, 3]"]);
    // Assigning an existing name prints its UID; a bad name is refused, the others still assigned.
    let (code, out, err) = tool(dir, "uid", &["assign", "tagk", "host", "dc", "bad name"]);
    assert_eq!(code, 1);
    assert_eq!(lines(&out), ["tagk host: [0, 0, 1]", "tagk dc: [0, 0, 2]"]);
    assert!(err.contains("Invalid tagk name (\"bad name\"): illegal character:  "), "{err}");
    let (code, _, err) = tool(dir, "uid", &["assign", "nosuchkind", "x"]);
    assert_eq!((code, err.trim()), (1, "rtsd: Invalid type requested: nosuchkind"));

    let (code, out, _) = tool(dir, "uid", &["grep", "cpu"]);
    assert_eq!(code, 0);
    assert_eq!(lines(&out), ["metrics sys.cpu.nice: [0, 0, 2]", "metrics sys.cpu.user: [0, 0, 1]"]);
    let (code, out, _) = tool_with(dir, "uid", &["-i"], &["grep", "tagk", "^H"]);
    assert_eq!((code, lines(&out)), (0, vec!["tagk host: [0, 0, 1]".to_string()]));
    let (code, out, _) = tool(dir, "uid", &["grep", "metrics", "nomatch"]);
    assert_eq!((code, out.as_str()), (1, ""));

    let (code, out, _) = tool(dir, "uid", &["metrics", "sys.mem.free"]);
    assert_eq!((code, lines(&out)), (0, vec!["metrics sys.mem.free: [0, 0, 3]".to_string()]));
    let (code, out, _) = tool(dir, "uid", &["tagv", "1"]);
    assert_eq!((code, lines(&out)), (0, vec!["tagv web01: [0, 0, 1]".to_string()]));
    let (code, out, _) = tool(dir, "uid", &["2"]);
    assert_eq!(
        (code, lines(&out)),
        (0, vec!["metrics sys.cpu.nice: [0, 0, 2]".to_string(), "tagk dc: [0, 0, 2]".to_string()])
    );

    let (code, _, err) = tool(dir, "uid", &["delete", "metrics", "sys.mem.free"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("UID metrics sys.mem.free deleted."), "{err}");
    let (code, _, err) = tool(dir, "uid", &["metrics", "sys.mem.free"]);
    assert_eq!((code, err.trim()), (1, "No such name for 'metrics': 'sys.mem.free'"));
    // The id is not handed out again.
    let (_, out, _) = tool(dir, "mkmetric", &["sys.mem.used"]);
    assert_eq!(lines(&out), ["metrics sys.mem.used: [0, 0, 4]"]);
    let (code, out, _) = tool(dir, "uid", &["fsck"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("Max ID for metrics is 4 but only 3 entries were found.  Maybe 1 IDs were deleted?"), "{out}");
    assert!(out.ends_with("No errors found.\n"), "{out}");
    let (code, _, err) = tool(dir, "uid", &["treesync"]);
    assert_eq!(code, 0, "{err}");
}

fn open_store(dir: &Path) -> Store {
    let config = Config::for_data_dir(dir, &[]).unwrap();
    Store::open(&config.store_options(), Arc::new(Metrics::new())).unwrap()
}

/// A row value in rtsd's encoding (`len qualifier len value` per column; every length here is below 128, so one
/// LEB128 byte).
fn row_of(cols: &[(&[u8], &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    for (q, v) in cols {
        out.push(q.len() as u8);
        out.extend_from_slice(q);
        out.push(v.len() as u8);
        out.extend_from_slice(v);
    }
    out
}

#[test]
fn fsck_finds_and_repairs_damage() {
    // A variant duplicate through the normal write path (tsd.storage.fix_duplicates is off, as in OpenTSDB):
    // the row keeps both cells. Then a second metric whose UID is deleted: its rows become orphans.
    let d = stopped_daemon_with(
        "put fsck.m 1356998400 1 host=a\n\
         put fsck.m 1356998400 1.5 host=a\n\
         put fsck.m 1356998460 2 host=a\n\
         put gone.m 1356998400 5 host=a\n",
    );
    let dir = d.data_dir();
    let (code, _, err) = tool(dir, "uid", &["delete", "metrics", "gone.m"]);
    assert_eq!(code, 0, "{err}");
    {
        // Damage no write path makes, written straight into rows: fsck.m=1, host=1, a=1.
        let s = open_store(dir);
        let key = |hour: u32| {
            let mut k = vec![0, 0, 1];
            k.extend_from_slice(&hour.to_be_bytes());
            k.extend_from_slice(&[0, 0, 1, 0, 0, 1]);
            k
        };
        s.rewrite_rows(&[
            // An invalid key (one byte short of a tag pair).
            (vec![0, 0, 1, 0x50, 0xE2, 0x35, 0x10, 0, 0, 1, 0, 0], Some(row_of(&[(&[0, 0], &[1])]))),
            // A 1-byte qualifier next to a good point, an 8-byte integer (VLE) and an int whose bytes disagree
            // with its qualifier.
            (
                key(1357002000),
                Some(row_of(&[
                    (&[0x01], &[9]),
                    (&[0x00, 0x07], &[0, 0, 0, 0, 0, 0, 0, 3]),
                    (&[0x00, 0x10], &[0, 5]),
                    (&[0x00, 0x20], &[4]),
                ])),
            ),
            // A compacted column whose values don't add up.
            (key(1357005600), Some(row_of(&[(&[0x00, 0x00, 0x00, 0x10], &[1, 2, 3, 0])]))),
        ])
        .unwrap();
    }
    let (code, out, err) = tool_with(dir, "fsck", &["--full-scan"], &[]);
    assert_eq!(code, 1, "{out}{err}");
    for expected in [
        "Invalid row key.\n\tKey: 00000150E235100000010000\n",
        "Unable to resolve the metric from the row key.\n\tKey: 00000250E22700000001000001\n",
        "No such unique ID for 'metrics': [0, 0, 2]",
        "Invalid qualifier, must be on 2 bytes or more.",
        "More than one column had a value for the same timestamp: (1356998400000 - Tue Jan 01 00:00:00 UTC 2013)",
        "The integer value is 2 bytes long but should be 1 bytes.",
        "Corrupted value: couldn't break down into individual values",
        "Rows Processed: 5\n",
        "Invalid Row Keys Found: 1\n",
        "Duplicate Datapoints: 1\n",
        "Orphaned UID Rows: 1\n",
        "Unknown Objects: 1\n",
        "Unparseable Datapoint Values: 1\n",
        "Unparseable Compacted Columns: 1\n",
        "Datapoints Qualified for VLE : 1\n",
        "Total Errors: 6\n",
        "Total Errors Fixed: 0\n",
    ] {
        assert!(out.contains(expected), "missing {expected:?} in:\n{out}");
    }

    // --fix-all repairs everything: bad rows and orphans deleted, bad columns dropped, duplicates resolved.
    let (code, out, _) = tool_with(dir, "fsck", &["--full-scan", "--fix-all"], &[]);
    assert_eq!(code, 1, "errors were found (and fixed): {out}");
    for expected in [
        "Invalid Rows Deleted: 1\n",
        "Duplicate Datapoints Resolved: 1\n",
        "Orphaned UID Rows Deleted: 1\n",
        "Unknown Objects Deleted: 1\n",
        "Unparseable Datapoint Values Deleted: 1\n",
        "Unparseable Compacted Columns Deleted: 1\n",
        "Datapoints Compressed with VLE: 1\n",
        "Total Errors Fixed: 6\n",
    ] {
        assert!(out.contains(expected), "missing {expected:?} in:\n{out}");
    }
    let (code, out, err) = tool_with(dir, "fsck", &["--full-scan"], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("Total Errors: 0\n") && out.contains("Rows Processed: 2\n"), "{out}");
    // What survives: the oldest of the duplicates, the good points of the damaged row, the VLE'd value.
    assert_eq!(
        scan_import(dir, "fsck.m"),
        normalize([
            "fsck.m 1356998400 1 host=a",
            "fsck.m 1356998460 2 host=a",
            "fsck.m 1357002000 3 host=a",
            "fsck.m 1357002002 4 host=a",
        ])
    );
    let (_, out, _) = tool(dir, "scan", &[RANGE[0], "1357009200", "sum", "fsck.m"]);
    assert!(out.contains("  [0, 0, 0, 32]\t[3, 4, 0] = 2 values:"), "{out}");

    // The same check on the rows of one query, with the tools' common command-line grammar.
    let (code, out, _) = tool(dir, "fsck", &["1356998400", "1357009200", "sum", "fsck.m", "host=a"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("Rows Processed: 2\n") && out.contains("Valid Datapoints: 4\n"), "{out}");
}

#[test]
fn writing_tools_go_through_a_running_daemon_or_say_why_not() {
    let d = Daemon::start();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("live.txt");
    std::fs::write(&file, "live.m 1356998400 1 host=a\nlive.m 1356998460 2 host=a\nlive.m 1356998520 oops host=a\n")
        .unwrap();
    let f = file.display().to_string();
    let port = d.port().to_string();
    let (code, _, err) = tool_with(d.data_dir(), "import", &["--port", &port, "--skip-errors"], &[&f]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("is in use by a running rtsd: importing through it at 127.0.0.1:"), "{err}");
    assert!(err.contains(&format!("{f}:3: invalid value: Invalid character 'o' in oops")), "{err}");
    assert!(err.contains("Total: imported 2 data points"), "{err}");
    let r = d.http("GET", "/api/query?start=1356998400&end=1356999000&m=sum:live.m", &[], b"");
    assert!(r.text().contains(r#""dps":{"1356998400":1,"1356998460":2}"#), "{}", r.text());
    // Reading tools work beside the daemon; writing ones explain.
    let (code, out, err) = tool(d.data_dir(), "query", &["1356998400", "1356999000", "sum", "live.m"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(lines(&out), ["live.m 1356998400000 1 {host=a}", "live.m 1356998460000 2 {host=a}"]);
    let (code, _, err) = tool(d.data_dir(), "mkmetric", &["x"]);
    assert_eq!(code, 1);
    assert!(err.contains("is in use by a running rtsd (RocksDB allows one writer); stop the daemon first"), "{err}");
}

#[test]
fn uid_rename_keeps_the_uid() {
    let d = stopped_daemon_with("put sys.cpu.nice 1356998400 1 host=web01\n");
    let dir = d.data_dir();
    let (code, out, err) = tool(dir, "uid", &["rename", "metrics", "sys.cpu.nice", "sys.cpu.idle"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(lines(&out), ["metrics sys.cpu.nice -> sys.cpu.idle"]);
    let (_, out, _) = tool(dir, "uid", &["metrics", "sys.cpu.idle"]);
    assert_eq!(lines(&out), ["metrics sys.cpu.idle: [0, 0, 1]"]);
    assert_eq!(scan_import(dir, "sys.cpu.idle"), ["sys.cpu.idle 1356998400 1 host=web01"]);
    let (code, _, err) = tool(dir, "uid", &["rename", "metrics", "nope", "x"]);
    assert_eq!((code, err.trim()), (1, "Name(\"nope\") does not exist"));
}

#[test]
fn import_through_a_daemon_maps_its_refusals_to_lines() {
    let mut d = Daemon::start_with(&[("tsd.core.auto_create_metrics", "false")]);
    stop(&mut d);
    let (code, out, err) = tool(d.data_dir(), "mkmetric", &["known.m"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(lines(&out), ["metrics known.m: [0, 0, 1]"]);
    let d = d.restart();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mixed.txt");
    std::fs::write(&file, "known.m 1356998400 1 host=a\nunknown.m 1356998400 2 host=a\nknown.m 1356998460 3 host=a\n")
        .unwrap();
    let f = file.display().to_string();
    let port = d.port().to_string();
    // The daemon only says which point it refused (with /api/put's text); the importer names the line.
    let (code, _, err) = tool_with(d.data_dir(), "import", &["--port", &port, "--skip-errors"], &[&f]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains(&format!("{f}:2: Unknown metric\n")), "{err}");
    assert!(err.contains("Total: imported 2 data points"), "{err}");
    let r = d.http("GET", "/api/query?start=1356998400&end=1356999000&m=sum:known.m", &[], b"");
    assert!(r.text().contains(r#""dps":{"1356998400":1,"1356998460":3}"#), "{}", r.text());
}

/// A body with the number after each `"created":`, `"lastReceived":` and `"time":` replaced by 0: when a series
/// or UID was first seen, when its points arrived and how long a lookup took are wall-clock matters, different for
/// two daemons fed the same lines.
fn without_times(body: &str) -> String {
    let mut out = body.to_string();
    for field in ["\"created\":", "\"lastReceived\":", "\"time\":"] {
        let mut done = String::new();
        let mut rest = out.as_str();
        while let Some(i) = rest.find(field) {
            let start = i + field.len();
            done.push_str(&rest[..start]);
            let digits = rest[start..].chars().take_while(|c| c.is_ascii_digit() || ".eE-".contains(*c)).count();
            done.push('0');
            rest = &rest[start + digits..];
        }
        done.push_str(rest);
        out = done;
    }
    out
}

/// Lines as the import format has them (no `put`): two metrics over closed hours of 2013 (stored packed) and the
/// last hour, integers, floats and doubles, second and millisecond timestamps, tags in either
/// order, sent out of order, with identical duplicates and overwrites of earlier values; `variant` gets a point
/// of a cell written once as an integer and once as a float (a variant duplicate: OpenTSDB leaves the row
/// uncompacted).
fn mixed_import_lines() -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    let recent = now - now % 3600 - 3600;
    let mut lines = Vec::new();
    let mut x: u64 = 7;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for (host, dc) in [("a", "1"), ("b", "1"), ("c", "2")] {
        for base in [1_356_998_400i64, recent] {
            for i in 0..300 {
                let r = next();
                let value = match r % 3 {
                    0 => format!("{}", (r >> 8) % 100_000),
                    1 => format!("{}.{:02}", (r >> 8) % 100, r % 100),
                    _ => format!("{}.123456789", (r >> 8) % 1000),
                };
                let ts =
                    if r % 7 == 0 { format!("{}{:03}", base + i * 25, r % 1000) } else { (base + i * 25).to_string() };
                let tags = if r % 2 == 0 { format!("host={host} dc={dc}") } else { format!("dc={dc} host={host}") };
                lines.push(format!("m {ts} {value} {tags}"));
            }
        }
        lines.push(format!("other 1356998400 1 host={host}"));
    }
    // Out of order: a deterministic shuffle; then overwrites and identical duplicates of earlier lines.
    for i in (1..lines.len()).rev() {
        let j = (next() as usize) % (i + 1);
        lines.swap(i, j);
    }
    for i in 0..40 {
        let line = lines[(next() as usize) % lines.len()].clone();
        let words: Vec<&str> = line.split(' ').collect();
        let value = if i % 2 == 0 { words[2].to_string() } else { format!("{}", i * 11) };
        lines.push(format!("{} {} {value} {}", words[0], words[1], words[3..].join(" ")));
    }
    lines.push("variant 1356998400 5 host=a".into());
    lines.push("variant 1356998410 6 host=a".into());
    lines.push("variant 1356998400 5.5 host=a".into());
    let mut text = lines.join("\n");
    text.push('\n');
    text
}

/// The answers compared between a daemon fed by telnet and one whose data was imported.
fn answers(d: &Daemon) -> Vec<(String, String)> {
    let recent = {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
        now - now % 3600 - 3600
    };
    let mut paths = Vec::new();
    for (start, end) in [("1356998400", "1357010000"), (&*recent.to_string(), &*(recent + 7200).to_string())] {
        for m in [
            "none:m",
            "sum:m%7Bhost=a%7D",
            "sum:1h-avg:m",
            "max:1m-sum:m%7Bhost=*%7D",
            "sum:10m-count:m",
            "none:variant",
            "sum:other",
        ] {
            paths.push(format!("/api/query?start={start}&end={end}&m={m}&show_query&ms"));
        }
    }
    paths.push("/api/query/last?timeseries=m%7Bhost=a,dc=1%7D&timeseries=other%7Bhost=c%7D&back_scan=0&resolve".into());
    paths.push("/api/search/lookup?m=m%7Bdc=1%7D".into());
    paths.push("/api/uid/tsmeta?m=m".into());
    paths.push("/api/uid/tsmeta?m=other".into());
    paths
        .into_iter()
        .map(|p| {
            let r = d.http("GET", &p, &[], b"");
            let body = without_times(&r.text());
            (p, format!("{} {body}", r.status))
        })
        .collect()
}

/// What the tools show of a stopped daemon's directory: every row's cells, and fsck's verdict.
fn tool_views(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for metric in ["m", "other", "variant"] {
        for range in [[RANGE[0], RANGE[1]], ["1700000000", "2100000000"]] {
            let (code, text, err) = tool(dir, "scan", &[range[0], range[1], "sum", metric]);
            assert_eq!(code, 0, "{err}");
            out.push(text);
        }
    }
    let (_, text, _) = tool_with(dir, "fsck", &["--full-scan"], &[]);
    out.push(text.lines().filter(|l| !l.contains(" ms") && !l.contains("seconds")).collect::<Vec<_>>().join("\n"));
    out
}

// spec: ingest §4.5-§4.6 (overwrites, compaction), §4.11 (TSMeta counters); issue 4 item 6: what `rtsd import`
// writes is what the daemon writes for the same lines: rows (packed), series index, UIDs,
// counters and rollups answer every query alike.
#[test]
fn an_import_stores_what_telnet_puts_of_the_same_lines_store() {
    let text = mixed_import_lines();
    let puts: String = text.lines().map(|l| format!("put {l}\n")).collect();
    let mut telnet = stopped_daemon_with(&puts);
    telnet = telnet.restart();

    let mut imported = stopped_daemon_with("");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("points.txt");
    std::fs::write(&file, &text).unwrap();
    let (code, _, err) = tool(imported.data_dir(), "import", &[&file.display().to_string()]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains(&format!("Total: imported {} data points in ", text.lines().count())), "{err}");
    imported = imported.restart();

    let (want, got) = (answers(&telnet), answers(&imported));
    for ((path, want), (_, got)) in want.iter().zip(&got) {
        assert_eq!(got, want, "{path}");
    }
    assert!(want.iter().any(|(p, a)| p.contains("1h-avg") && a.contains(r#""rollupTable":"1h""#)), "{want:?}");
    stop(&mut telnet);
    stop(&mut imported);
    assert_eq!(tool_views(imported.data_dir()), tool_views(telnet.data_dir()));
}

// Importing into a directory that already has points in the same rows (and cells) merges with them exactly as
// more telnet puts would: later points win, nothing stored before is lost.
#[test]
fn an_import_over_stored_points_merges_as_more_puts_would() {
    let text = mixed_import_lines();
    let all: Vec<&str> = text.lines().collect();
    let (first, second) = all.split_at(all.len() / 2);
    let puts = |lines: &[&str]| -> String { lines.iter().map(|l| format!("put {l}\n")).collect() };
    let mut telnet = stopped_daemon_with(&(puts(first) + &puts(second)));
    telnet = telnet.restart();

    let mut imported = stopped_daemon_with(&puts(first));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("second.txt");
    std::fs::write(&file, second.join("\n") + "\n").unwrap();
    let (code, _, err) = tool(imported.data_dir(), "import", &[&file.display().to_string()]);
    assert_eq!(code, 0, "{err}");
    imported = imported.restart();
    let (want, got) = (answers(&telnet), answers(&imported));
    for ((path, want), (_, got)) in want.iter().zip(&got) {
        assert_eq!(got, want, "{path}");
    }
    stop(&mut telnet);
    stop(&mut imported);
    assert_eq!(tool_views(imported.data_dir()), tool_views(telnet.data_dir()));
}
