//! `rtsd-bench rollups`: what rollups buy a long dashboard (issue 6). One rtsd with rollups on takes D days of H
//! hosts (one metric, a point every S seconds, sent as a live feed would send them: round after round), then the
//! H-host `sum:1h-avg` query over the whole range runs from the rollup tables (the default) and from raw data
//! (`rollup_raw`) on the same server, interleaved, after one warm-up each. The two answers must be byte-identical.
//!
//! The data are streamed, never rendered whole: a month of 1000 hosts at 60 s is 43 M points.
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use crate::data::{Series, Val};
use crate::http;
use crate::report::{date_time, median, si};
use crate::server::{self, Kind, Server};

const METRIC: &str = "bench.rollup.gauge";
/// 2023-11-14T00:00:00Z: the first point (a whole day, so every 1h bucket is full).
const START: i64 = 1_699_920_000;

struct Options {
    days: u32,
    hosts: u32,
    step: u32,
    conns: usize,
    repeats: usize,
    rtsd: PathBuf,
    results: Option<PathBuf>,
    note: Option<String>,
    command: String,
    /// Keep the data directory (and leave its path on stderr) to look at or profile afterwards.
    keep: bool,
}

/// Parses `rtsd-bench rollups ...` and runs it.
pub fn cli(args: &[String], root: &Path) -> Result<(), String> {
    let mut o = Options {
        days: 30,
        hosts: 1000,
        step: 60,
        conns: 4,
        repeats: 5,
        rtsd: root.join("target/release/rtsd"),
        results: Some(root.join("bench/RESULTS.md")),
        note: None,
        command: std::iter::once("rtsd-bench".to_string())
            .chain(args[1..].iter().map(|a| shell_word(a)))
            .collect::<Vec<_>>()
            .join(" "),
        keep: false,
    };
    let mut i = 2;
    while i < args.len() {
        let value = || args.get(i + 1).cloned().ok_or_else(|| format!("{} needs a value", args[i]));
        let number = |v: String| v.parse::<u64>().map_err(|_| format!("{}: bad number {v:?}", args[i]));
        match args[i].as_str() {
            "--days" => o.days = number(value()?)? as u32,
            "--hosts" => o.hosts = number(value()?)? as u32,
            "--step" => o.step = number(value()?)? as u32,
            "--conns" => o.conns = number(value()?)? as usize,
            "--repeats" => o.repeats = number(value()?)? as usize,
            "--rtsd" => o.rtsd = PathBuf::from(value()?),
            "--note" => o.note = Some(value()?),
            "--no-record" => {
                o.results = None;
                i += 1;
                continue;
            }
            "--keep" => {
                o.keep = true;
                i += 1;
                continue;
            }
            other => return Err(format!("unknown argument {other:?} (see --help)")),
        }
        i += 2;
    }
    if o.days == 0 || o.hosts == 0 || o.step == 0 || o.conns == 0 || o.repeats == 0 {
        return Err("--days, --hosts, --step, --conns and --repeats must be at least 1".into());
    }
    run(&o)
}

/// `a` as a shell word, quoted when it needs to be (so the recorded command can be pasted).
fn shell_word(a: &str) -> String {
    if !a.is_empty() && a.bytes().all(|b| b.is_ascii_alphanumeric() || b"_./,=:+-".contains(&b)) {
        a.to_string()
    } else {
        format!("'{}'", a.replace('\'', "'\\''"))
    }
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// Sends connection `c`'s share of the hosts, round after round, then waits for the `version` reply that
/// follows every earlier put's commit. Returns the error lines the server sent, if any.
fn feed(addr: SocketAddr, o: &Options, c: usize) -> Result<Vec<String>, String> {
    let stream = TcpStream::connect(addr).map_err(|e| format!("connect: {e}"))?;
    let mut out = BufWriter::with_capacity(1 << 20, stream.try_clone().map_err(|e| e.to_string())?);
    let hosts: Vec<u32> = (0..o.hosts).filter(|h| *h as usize % o.conns == c).collect();
    let mut series: Vec<Series> = hosts.iter().map(|&h| Series::new(h, 0)).collect();
    let rounds = u64::from(o.days) * 86_400 / u64::from(o.step);
    let mut line = Vec::with_capacity(96);
    for r in 0..rounds {
        let ts = START + (r * u64::from(o.step)) as i64;
        for (s, &h) in series.iter_mut().zip(&hosts) {
            line.clear();
            line.extend_from_slice(b"put ");
            line.extend_from_slice(METRIC.as_bytes());
            line.push(b' ');
            crate::data::push_i64(&mut line, ts);
            line.push(b' ');
            let v: Val = s.next_value();
            v.push(&mut line);
            line.extend_from_slice(format!(" host=host{h:04}\n").as_bytes());
            out.write_all(&line).map_err(|e| format!("send: {e}"))?;
        }
    }
    out.write_all(b"version\n").map_err(|e| format!("send: {e}"))?;
    out.flush().map_err(|e| format!("send: {e}"))?;
    let mut reader = BufReader::new(stream);
    let mut errors = Vec::new();
    loop {
        let mut l = String::new();
        if reader.read_line(&mut l).map_err(|e| format!("read: {e}"))? == 0 {
            return Err("connection closed before the version reply".into());
        }
        if l.starts_with("Built on ") {
            return Ok(errors);
        }
        if !l.starts_with("net.opentsdb.tools ") {
            errors.push(l.trim_end().to_string());
        }
    }
}

fn run(o: &Options) -> Result<(), String> {
    let began = Instant::now();
    let load_before = load_average();
    let scratch = std::env::temp_dir().join(format!("rtsd-bench-rollups-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).map_err(|e| format!("{}: {e}", scratch.display()))?;
    let result = measure(o, &scratch);
    if o.keep {
        eprintln!("kept {}", scratch.display());
    } else {
        let _ = std::fs::remove_dir_all(&scratch);
    }
    let (table, checks) = result?;
    let load_after = load_average();
    let commit = std::process::Command::new("git")
        .args(["-C", &crate::runner::workspace_root().to_string_lossy(), "rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let mut entry = format!(
        "\n## {} — rollups: {} days x {} hosts every {} s, 1h-avg from rollups vs raw\n\nCommand: `{}`\n\n",
        date_time(SystemTime::now()),
        o.days,
        o.hosts,
        o.step,
        o.command
    );
    entry.push_str(&format!(
        "Machine: {cpus} CPUs; load average before {load_before}, after {load_after}; took {:.0} s. rtsd: commit \
         {commit}, binary {}, started with `--set tsd.rollups.enable=true --set rtsd.retention.raw_hours=0 --set rtsd.retention.rollup_hours=0` (built-in 1m/10m/1h rollups, everything kept: the data are from 2023).\n",
        began.elapsed().as_secs_f64(),
        o.rtsd.display()
    ));
    if let Some(n) = &o.note {
        entry.push_str(&format!("\n{n}\n"));
    }
    entry.push('\n');
    entry.push_str(&table);
    entry.push_str(&format!("\nChecks: {checks}\n"));
    print!("{entry}");
    if let Some(path) = &o.results {
        crate::report::append(path, &entry)?;
        println!("appended to {}", path.display());
    }
    Ok(())
}

/// Ingests, queries, and returns the table and the checks line.
fn measure(o: &Options, scratch: &Path) -> Result<(String, String), String> {
    // Everything is kept (the data are from November 2023; the default retentions would cut them).
    let extra: Vec<String> = ["tsd.rollups.enable=true", "rtsd.retention.raw_hours=0", "rtsd.retention.rollup_hours=0"]
        .iter()
        .flat_map(|s| ["--set".to_string(), s.to_string()])
        .collect();
    let mut server = Server::start_with_args(Kind::Rtsd, &o.rtsd, scratch, &extra)?;
    let points = u64::from(o.hosts) * (u64::from(o.days) * 86_400 / u64::from(o.step));
    eprintln!("rollups bench: sending {points} points over {} connections", o.conns);
    let started = Instant::now();
    let errors: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..o.conns).map(|c| scope.spawn(move || feed(server.telnet, o, c))).collect();
        let mut all = Vec::new();
        for h in handles {
            all.extend(h.join().map_err(|_| "a feeding thread panicked".to_string())??);
        }
        Ok::<_, String>(all)
    })?;
    let ingest = started.elapsed();
    if !errors.is_empty() {
        return Err(format!("the server refused points: {:?}", &errors[..errors.len().min(5)]));
    }
    let end = START + i64::from(o.days) * 86_400 - 1;
    let path = |usage: &str| format!("/api/query?start={START}&end={end}&m=sum:1h-avg:{usage}{METRIC}");
    let timeout = Duration::from_secs(600);
    let query = |usage: &str| -> Result<(Duration, String), String> {
        let t = Instant::now();
        let r = http::get(server.api, &path(usage), timeout).map_err(|e| format!("query: {e}"))?;
        let took = t.elapsed();
        if r.status != 200 {
            return Err(format!("query {} answered {}: {}", path(usage), r.status, r.text()));
        }
        Ok((took, r.text()))
    };
    // The first rollup query also folds whatever raw rows were still pending when the feed ended.
    let (first_rollup, rolled) = query("")?;
    let (first_raw, raw) = query("rollup_raw:")?;
    let (mut from_rollups, mut from_raw) = (Vec::new(), Vec::new());
    for _ in 0..o.repeats {
        from_rollups.push(query("")?.0.as_secs_f64() * 1000.0);
        from_raw.push(query("rollup_raw:")?.0.as_secs_f64() * 1000.0);
    }
    let same = rolled == raw;
    // Output points: the keys of the "dps" object.
    let buckets = rolled.split_once("\"dps\":{").map_or(0, |(_, dps)| dps.matches("\":").count());
    let metrics = server.metrics()?;
    let written = server::metric_value(&metrics, "rtsd_rollup_buckets_written_total").unwrap_or(0.0);
    let rss = server.peak_rss_kib().map(|k| k as f64 / 1024.0).unwrap_or(0.0);
    server.stop(Duration::from_secs(60))?;
    let (du, _) = server::du(&server.data_dir)?;
    let (r, w) = (median(&from_rollups), median(&from_raw));
    let mut t = String::new();
    t.push_str("| figure | value |\n|---|---|\n");
    t.push_str(&format!(
        "| points sent (one metric, {} hosts, {} days, every {} s) | {} |\n",
        o.hosts,
        o.days,
        o.step,
        si(points as f64)
    ));
    t.push_str(&format!(
        "| telnet ingest with rollups on (points/s, {} connections) | {} |\n",
        o.conns,
        si(points as f64 / ingest.as_secs_f64())
    ));
    t.push_str(&format!("| rollup buckets written (1m + 10m + 1h, all folds) | {} |\n", si(written)));
    t.push_str(&format!(
        "| `sum:1h-avg` over {} hosts, {} days, from rollups: median of {} (ms) | {r:.1} |\n",
        o.hosts, o.days, o.repeats
    ));
    t.push_str(&format!("| the same from raw data (`rollup_raw`): median of {} (ms) | {w:.1} |\n", o.repeats));
    t.push_str(&format!("| raw / rollups | {:.1}x |\n", w / r.max(1e-9)));
    t.push_str(&format!(
        "| first query after the feed: rollups (incl. folding what was pending) / raw (ms) | {:.1} / {:.1} |\n",
        first_rollup.as_secs_f64() * 1000.0,
        first_raw.as_secs_f64() * 1000.0
    ));
    t.push_str(&format!("| data directory after a graceful stop (bytes/point) | {:.1} |\n", du as f64 / points as f64));
    t.push_str(&format!("| peak RSS (MiB) | {rss:.0} |\n"));
    let checks = format!(
        "rollup answer byte-identical to the raw answer: {} ({} bytes, {} output points); no put refused: yes",
        if same { "yes" } else { "NO" },
        rolled.len(),
        buckets
    );
    if !same {
        return Err(format!(
            "rollup and raw answers differ:\n{}\n{}",
            &rolled[..rolled.len().min(400)],
            &raw[..raw.len().min(400)]
        ));
    }
    Ok((t, checks))
}
