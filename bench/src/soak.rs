//! `rtsd-bench soak`: does memory stay bounded during a long ingest whose series keep changing (issue 6 item 5)?
//! Each server in turn takes telnet puts of S live series for M minutes, as fast as it accepts them; every round
//! (one point per live series, one second later than the round before) 1% of the series are replaced by new
//! ones (new `host` tag values: new UIDs, new series-index entries), so names, UIDs and series grow all the
//! time while the live set stays the same size. The resident set (VmRSS) is sampled every 10 s; the table shows
//! it per minute, next to the points and distinct series sent by then.
//!
//! rtsd's per-process memory is bounded by its caches (`rtsd.uid.cache_capacity` names per UID kind and
//! direction, also the series-index write cache) and RocksDB's memtables and block cache; `--set` passes
//! properties, e.g. a smaller `rtsd.uid.cache_capacity` so the bound is reached early in a short run.
use std::io::{BufWriter, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use crate::report::{date_time, si};
use crate::server::{self, Kind, Server};

const METRIC: &str = "bench.soak.gauge";
/// A slot's series is replaced every this many rounds (staggered across slots: 1% per round).
const RENEW_EVERY: u64 = 100;
const SAMPLE_EVERY: Duration = Duration::from_secs(10);

struct Options {
    minutes: u64,
    series: u64,
    conns: usize,
    servers: Vec<Kind>,
    rtsd: PathBuf,
    vm: PathBuf,
    set: Vec<String>,
    results: Option<PathBuf>,
    note: Option<String>,
    command: String,
}

/// One RSS sample: seconds since the feed started, points sent, distinct series sent, RSS in KiB.
#[derive(Debug, Clone, Copy)]
struct Sample {
    secs: f64,
    points: u64,
    series: u64,
    rss_kib: u64,
}

/// Parses `rtsd-bench soak ...` and runs it.
pub fn cli(args: &[String], root: &Path) -> Result<(), String> {
    let mut o = Options {
        minutes: 10,
        series: 20_000,
        conns: 2,
        servers: vec![Kind::Rtsd, Kind::Vm],
        rtsd: root.join("target/release/rtsd"),
        vm: server::which("victoria-metrics").unwrap_or_else(|| PathBuf::from("/usr/bin/victoria-metrics")),
        set: Vec::new(),
        results: Some(root.join("bench/RESULTS.md")),
        note: None,
        command: format!("cargo run --release -p rtsd-bench -- {}", args[1..].join(" ")),
    };
    let mut i = 2;
    while i < args.len() {
        let value = || args.get(i + 1).cloned().ok_or_else(|| format!("{} needs a value", args[i]));
        let num = || -> Result<u64, String> {
            let v = value()?;
            v.parse::<u64>().ok().filter(|n| *n > 0).ok_or_else(|| format!("{}: bad number {v:?}", args[i]))
        };
        let mut used = 2;
        match args[i].as_str() {
            "--minutes" => o.minutes = num()?,
            "--series" => o.series = num()?,
            "--conns" => o.conns = num()? as usize,
            "--rtsd" => o.rtsd = PathBuf::from(value()?),
            "--vm" => o.vm = PathBuf::from(value()?),
            "--set" => o.set.push(value()?),
            "--note" => o.note = Some(value()?),
            "--no-record" => {
                o.results = None;
                used = 1;
            }
            "--servers" => {
                o.servers = value()?
                    .split(',')
                    .map(|s| match s.trim() {
                        "rtsd" => Ok(Kind::Rtsd),
                        "vm" => Ok(Kind::Vm),
                        other => Err(format!("unknown server {other:?}")),
                    })
                    .collect::<Result<_, _>>()?
            }
            other => return Err(format!("unknown option {other:?} (see rtsd-bench help)")),
        }
        i += used;
    }
    run(&o)
}

fn run(o: &Options) -> Result<(), String> {
    let load_before = load_average();
    let scratch = std::env::temp_dir().join(format!("rtsd-bench-soak-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).map_err(|e| format!("{}: {e}", scratch.display()))?;
    let mut runs = Vec::new();
    for &kind in &o.servers {
        let result = soak(o, kind, &scratch);
        let _ = std::fs::remove_dir_all(scratch.join(format!("{}-data", kind.short())));
        runs.push((kind, result?));
    }
    let _ = std::fs::remove_dir_all(&scratch);
    let load_after = load_average();
    let mut entry = format!(
        "\n## {} soak: RSS during {} minutes of ingest with series churn\n\nCommand: `{}`. {} live series of one \
         metric, a point each per round, 1% of them replaced by new series every round; {} telnet connections, \
         as fast as the server takes them. rtsd {}. Machine: {} CPUs shared with other engineers' builds; load \
         average before {load_before}, after {load_after}.\n",
        date_time(SystemTime::now()),
        o.minutes,
        o.command,
        o.series,
        o.conns,
        if o.set.is_empty() {
            "with its defaults".to_string()
        } else {
            format!("with `--set {}`", o.set.join(" --set "))
        },
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
    );
    if let Some(n) = &o.note {
        entry.push_str(&format!("\n{n}\n"));
    }
    entry.push_str("\n| minute |");
    for (kind, _) in &runs {
        entry.push_str(&format!(" {k} points sent | {k} series sent | {k} RSS (MiB) |", k = kind.label()));
    }
    entry.push_str("\n|---|");
    for _ in &runs {
        entry.push_str("---|---|---|");
    }
    entry.push('\n');
    for minute in 1..=o.minutes {
        entry.push_str(&format!("| {minute} |"));
        for (_, samples) in &runs {
            // The last sample of the minute.
            match samples.iter().rev().find(|s| s.secs <= minute as f64 * 60.0 + 0.5) {
                Some(s) => entry.push_str(&format!(
                    " {} | {} | {:.0} |",
                    si(s.points as f64),
                    si(s.series as f64),
                    s.rss_kib as f64 / 1024.0
                )),
                None => entry.push_str(" - | - | - |"),
            }
        }
        entry.push('\n');
    }
    entry.push('\n');
    for (kind, samples) in &runs {
        let at = |frac: f64| {
            let t = samples.last().map_or(0.0, |s| s.secs) * frac;
            samples.iter().find(|s| s.secs >= t).map_or(0, |s| s.rss_kib)
        };
        let (half, end) = (at(0.5), at(1.0));
        let peak = samples.iter().map(|s| s.rss_kib).max().unwrap_or(0);
        entry.push_str(&format!(
            "{}: RSS at the end / at half time = {:.2}; peak {:.0} MiB; {} distinct series sent in all.\n",
            kind.label(),
            end as f64 / half.max(1) as f64,
            peak as f64 / 1024.0,
            si(samples.last().map_or(0, |s| s.series) as f64),
        ));
    }
    print!("{entry}");
    if let Some(path) = &o.results {
        crate::report::append(path, &entry)?;
        println!("appended to {}", path.display());
    }
    Ok(())
}

/// Runs one server through the soak and returns its samples.
fn soak(o: &Options, kind: Kind, scratch: &Path) -> Result<Vec<Sample>, String> {
    let (bin, extra): (&Path, Vec<String>) = match kind {
        Kind::Rtsd => (&o.rtsd, o.set.iter().flat_map(|s| ["--set".to_string(), s.clone()]).collect()),
        Kind::Vm => (&o.vm, Vec::new()),
        Kind::OpenTsdb | Kind::RtsdHbase => return Err("the soak runs rtsd and VictoriaMetrics only".into()),
    };
    let mut server = Server::start_with_args(kind, bin, scratch, &extra)?;
    let stop = Arc::new(AtomicBool::new(false));
    let points = Arc::new(AtomicU64::new(0));
    let rounds = Arc::new(AtomicU64::new(0));
    // Every point 1 s after the previous round's, from a day ago: never in the future within a day of rounds.
    let start_ts = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs()) - 86_400;
    let feeders: Vec<_> = (0..o.conns)
        .map(|c| {
            let (stop, points, rounds) = (stop.clone(), points.clone(), rounds.clone());
            let (addr, series, conns) = (server.telnet, o.series, o.conns);
            std::thread::spawn(move || feed(addr, series, conns, c, start_ts, &stop, &points, &rounds))
        })
        .collect();
    let began = Instant::now();
    let until = began + Duration::from_secs(o.minutes * 60);
    let mut samples = Vec::new();
    let mut next = began + SAMPLE_EVERY;
    while Instant::now() < until {
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        next += SAMPLE_EVERY;
        let r = rounds.load(Ordering::Relaxed) / o.conns as u64;
        samples.push(Sample {
            secs: began.elapsed().as_secs_f64(),
            points: points.load(Ordering::Relaxed),
            // The live set, plus the slots renewed so far.
            series: o.series + o.series * r / RENEW_EVERY,
            rss_kib: rss_kib(server.pid).unwrap_or(0),
        });
        if !server.running() {
            return Err(format!("{} exited during the soak; log:\n{}", kind.label(), server.log_tail(20)));
        }
    }
    stop.store(true, Ordering::Relaxed);
    for f in feeders {
        f.join().map_err(|_| "a feeding thread panicked".to_string())??;
    }
    server.stop(Duration::from_secs(120))?;
    Ok(samples)
}

/// Connection `c` sends its share of the slots, round after round, until `stop`. A put that succeeds gets no
/// reply, so any reply byte is an error: the reader thread collects them.
#[allow(clippy::too_many_arguments)]
fn feed(
    addr: SocketAddr,
    series: u64,
    conns: usize,
    c: usize,
    start_ts: u64,
    stop: &AtomicBool,
    points: &AtomicU64,
    rounds: &AtomicU64,
) -> Result<(), String> {
    let stream = TcpStream::connect(addr).map_err(|e| format!("connect: {e}"))?;
    let mut reader = stream.try_clone().map_err(|e| e.to_string())?;
    let replies = std::thread::spawn(move || {
        let mut got = Vec::new();
        let _ = reader.read_to_end(&mut got);
        got
    });
    let mut out = BufWriter::with_capacity(1 << 20, stream.try_clone().map_err(|e| e.to_string())?);
    let slots: Vec<u64> = (0..series).filter(|s| *s as usize % conns == c).collect();
    let mut line = Vec::with_capacity(96);
    let mut r: u64 = 0;
    while !stop.load(Ordering::Relaxed) {
        let ts = start_ts + r;
        for &s in &slots {
            // Slot s holds series number s + series * (how many times it was renewed): staggered by s.
            let host = s + series * ((r + s) / RENEW_EVERY);
            line.clear();
            writeln!(line, "put {METRIC} {ts} {} host=h{host} dc=dc{}", (r + s) % 1000, s % 16)
                .map_err(|e| e.to_string())?;
            out.write_all(&line).map_err(|e| format!("send: {e}"))?;
        }
        points.fetch_add(slots.len() as u64, Ordering::Relaxed);
        rounds.fetch_add(1, Ordering::Relaxed);
        r += 1;
    }
    out.flush().map_err(|e| format!("send: {e}"))?;
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let got = replies.join().map_err(|_| "reply reader panicked".to_string())?;
    if !got.is_empty() {
        let text = String::from_utf8_lossy(&got);
        return Err(format!("the server refused points: {}", text.lines().take(3).collect::<Vec<_>>().join(" | ")));
    }
    Ok(())
}

/// The current resident set size of `pid` (`VmRSS`), in KiB.
fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}
