//! The side-by-side runner: rtsd, VictoriaMetrics and OpenTSDB 2.4.1 (on its HBase test bed) on loopback, fresh scratch data directories per
//! measurement, runs interleaved, medians and ratios, correctness checks, and a record in `bench/RESULTS.md`.

use crate::data::{self, DataSet};
use crate::http;
use crate::load::{self, Clients};
use crate::report::{self, Check, Samples};
use crate::server::{self, Kind, Proto, Server};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// What to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scenario {
    /// Data set A over telnet.
    ATelnet,
    /// Data set A over HTTP `/api/put`.
    AHttp,
    /// Data set B over telnet, then disk, q1/q2/q3, and visibility.
    B,
    /// Data set A's lines as a file, through `rtsd import` into a stopped data directory (rtsd only; the
    /// import/telnet table compares it with A telnet of the same session).
    AImport,
}

impl Scenario {
    pub fn parse(s: &str) -> Option<Scenario> {
        match s {
            "a-telnet" => Some(Scenario::ATelnet),
            "a-http" => Some(Scenario::AHttp),
            "b" => Some(Scenario::B),
            "a-import" => Some(Scenario::AImport),
            _ => None,
        }
    }
    pub fn label(self) -> &'static str {
        match self {
            Scenario::ATelnet => "A telnet",
            Scenario::AHttp => "A HTTP",
            Scenario::B => "B telnet",
            Scenario::AImport => "A import",
        }
    }
}

/// The runner's options (see `rtsd-bench --help`).
#[derive(Debug, Clone)]
pub struct Options {
    pub scale: f64,
    pub hosts: Option<u32>,
    pub runs: usize,
    pub conns: usize,
    pub per_request: usize,
    pub scenarios: Vec<Scenario>,
    pub servers: Vec<Kind>,
    pub rtsd: PathBuf,
    pub vm: PathBuf,
    /// The workspace's `scripts/` (hbase-cluster, opentsdb-ref), for OpenTSDB.
    pub scripts: PathBuf,
    pub scratch: PathBuf,
    pub keep: bool,
    pub results: Option<PathBuf>,
    /// Below this ingest rate (points/s) a measurement is abandoned as failed.
    pub min_rate: f64,
    pub q_repeats: usize,
    pub probes: usize,
    pub command: String,
    pub note: Option<String>,
    /// Hours the data sets are moved into the past (`--hours-back`): 2 puts them in a closed hour, whose rows
    /// rtsd packs when it compacts them.
    pub hours_back: i64,
}

/// Removes the scratch directory when dropped (unless asked to keep it).
struct Scratch {
    dir: PathBuf,
    keep: bool,
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

fn now_s() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}

/// Everything one session of the runner measured.
pub struct Session {
    pub samples: Samples,
    pub checks: Vec<Check>,
    pub notes: Vec<String>,
    pub generator: Vec<String>,
    pub sets: Vec<String>,
}

/// Runs the whole benchmark; prints progress on stderr and the table on stdout; appends to the results file.
pub fn run(opts: &Options) -> Result<(), String> {
    let rtsd_runs = opts.servers.iter().any(|k| matches!(k, Kind::Rtsd | Kind::RtsdHbase));
    if !opts.rtsd.is_file() && rtsd_runs {
        return Err(format!("{} not found: run `cargo build --release --bin rtsd` first", opts.rtsd.display()));
    }
    if !opts.vm.is_file() && opts.servers.contains(&Kind::Vm) {
        return Err(format!("{} not found: `apt-get install -y victoria-metrics`", opts.vm.display()));
    }
    if let Some(k) = opts.servers.iter().find(|k| k.on_hbase()) {
        for tool in ["java", "mvn"] {
            if server::which(tool).is_none() {
                return Err(format!("{}'s HBase test bed needs {tool}: run scripts/install-test-deps", k.label()));
            }
        }
    }
    std::fs::create_dir_all(&opts.scratch).map_err(|e| format!("creating {}: {e}", opts.scratch.display()))?;
    let _scratch = Scratch { dir: opts.scratch.clone(), keep: opts.keep };
    // Run a copy of rtsd: target/release/rtsd may be rebuilt by someone else while the runs go on.
    let rtsd_path = opts.rtsd.clone();
    let rtsd_built = std::fs::metadata(&opts.rtsd).and_then(|m| m.modified()).ok();
    let mut opts = opts.clone();
    if rtsd_runs {
        let copy = opts.scratch.join("rtsd-under-test");
        std::fs::copy(&opts.rtsd, &copy).map_err(|e| format!("copying {}: {e}", opts.rtsd.display()))?;
        opts.rtsd = copy;
    }
    let opts = &opts;
    let started = SystemTime::now();
    let load_before = loadavg();
    let mut s = Session {
        samples: Samples::default(),
        checks: Vec::new(),
        notes: Vec::new(),
        generator: Vec::new(),
        sets: Vec::new(),
    };
    let last_ts = data::default_last_ts(now_s()) - opts.hours_back * 3600;
    for &scenario in &opts.scenarios {
        run_scenario(opts, scenario, last_ts, &mut s);
    }
    let load_after = loadavg();
    let mut table =
        if opts.servers.contains(&Kind::Vm) { report::table(&s.samples, &opts.servers) } else { String::new() };
    for (a, b) in report::PAIRS {
        if !(opts.servers.contains(a) && opts.servers.contains(b)) {
            continue;
        }
        if let Some(pair) = report::pair_table(&s.samples, *a, *b) {
            if !table.is_empty() {
                table.push('\n');
            }
            table.push_str(&pair);
        }
    }
    if opts.servers.iter().any(|k| k.on_hbase()) {
        s.notes.push(
            "On an HBase test bed (OpenTSDB, rtsd-on-HBase: ZooKeeper, an HMaster and 3 region servers, each a JVM, \
             fresh per measurement): each measurement first sends a burst of data set A's shape (on the \
             scenario's protocol) whose metric names, tag keys and tag values are all new ('first burst' rows), \
             waits until the server and cluster are idle, then measures the scenario on the warm cluster (its \
             names are new too); 'points per server CPU-second', 'server CPU-s until settled' and 'peak RSS' \
             count the server's process and the cluster's JVMs; the rows '... process alone' count only rtsd's \
             process or OpenTSDB's TSD JVM; disk is the cluster's HBase root directory (HFiles and WALs) after \
             the server and the cluster stopped."
                .into(),
        );
    }
    if let Some(import) = report::import_table(&s.samples) {
        table.push('\n');
        table.push_str(&import);
    }
    let elapsed = started.elapsed().unwrap_or_default();
    println!();
    println!("{table}");
    for g in &s.generator {
        println!("{g}");
    }
    let failed: Vec<&Check> = s.checks.iter().filter(|c| !c.ok).collect();
    println!("checks: {} passed, {} failed", s.checks.len() - failed.len(), failed.len());
    for c in &failed {
        println!("  FAILED {}: {}", c.what, c.detail);
    }
    for n in &s.notes {
        println!("note: {n}");
    }
    if let Some(path) = &opts.results {
        let facts = report::MachineFacts::gather(&rtsd_path, rtsd_built, &opts.vm, load_before, load_after, elapsed);
        let entry = report::results_entry(opts, &facts, &table, &s);
        report::append(path, &entry)?;
        println!("appended to {}", path.display());
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("{} check(s) failed", failed.len()))
    }
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split(' ').take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// The rendered bytes of one scenario.
enum Wire {
    Telnet(Arc<Vec<Vec<u8>>>),
    Http(Arc<Vec<Vec<Vec<u8>>>>),
}

fn run_scenario(opts: &Options, scenario: Scenario, last_ts: i64, s: &mut Session) {
    let set = match scenario {
        Scenario::ATelnet | Scenario::AHttp | Scenario::AImport => DataSet::a(opts.scale, opts.hosts, last_ts),
        Scenario::B => DataSet::b(opts.scale, opts.hosts, last_ts),
    };
    if scenario == Scenario::AImport {
        return run_import_scenario(opts, &set, s);
    }
    let t = Instant::now();
    let wire = match scenario {
        Scenario::AHttp => Wire::Http(Arc::new(set.render_http(opts.conns, opts.per_request))),
        _ => Wire::Telnet(Arc::new(set.render_telnet(opts.conns))),
    };
    let bytes: u64 = match &wire {
        Wire::Telnet(d) => d.iter().map(|b| b.len() as u64).sum(),
        Wire::Http(d) => d.iter().flatten().map(|b| b.len() as u64).sum(),
    };
    let desc = format!(
        "{}: {}, {:.1} MB rendered in {:.1} s, {} connections{}",
        scenario.label(),
        set.describe(),
        bytes as f64 / 1e6,
        t.elapsed().as_secs_f64(),
        opts.conns,
        if scenario == Scenario::AHttp { format!(", {} points per request", opts.per_request) } else { String::new() },
    );
    eprintln!("{desc}");
    s.sets.push(desc);
    // The generator alone, into a discard sink.
    let gen = match &wire {
        Wire::Telnet(d) => load::sink_check_telnet(d.clone(), set.points()),
        Wire::Http(d) => load::sink_check_http(d.clone(), set.points()),
    };
    match gen {
        Ok((rate, el)) => {
            let line = format!(
                "generator, {} into a discard sink: {} points/s ({:.2} s for {} points, {} connections)",
                scenario.label(),
                report::si(rate),
                el.as_secs_f64(),
                set.points(),
                opts.conns
            );
            eprintln!("{line}");
            s.generator.push(line);
        }
        Err(e) => {
            s.checks.push(Check::fail(format!("generator {} into a discard sink", scenario.label()), e.to_string()))
        }
    }
    // A test bed's JVMs start cold for every measurement: a first burst of the same shape under other names
    // (data set A's, on the scenario's protocol) warms them before the measured one (see `measure`).
    let warm_set = DataSet::a(opts.scale, opts.hosts, last_ts).renamed(WARM_NAMES);
    let warm = opts.servers.iter().any(|k| k.on_hbase()).then(|| {
        let wire = match scenario {
            Scenario::AHttp => Wire::Http(Arc::new(warm_set.render_http(opts.conns, opts.per_request))),
            _ => Wire::Telnet(Arc::new(warm_set.render_telnet(opts.conns))),
        };
        (&warm_set, wire)
    });
    let warm = warm.as_ref().map(|(set, wire)| (*set, wire));
    let mut answers: Answers = BTreeMap::new();
    for run in 0..opts.runs {
        let mut order = opts.servers.clone();
        if run % 2 == 1 {
            order.reverse();
        }
        for kind in order {
            let what = format!("{} {} run {}", scenario.label(), kind.label(), run + 1);
            let warm = warm.filter(|_| kind.on_hbase());
            if let Err(e) = measure(opts, scenario, kind, (&set, &wire), warm, run, s, &mut answers) {
                eprintln!("{what}: FAILED: {e}");
                s.checks.push(Check::fail(what, e));
            }
        }
    }
    // q1/q2/q3 equal on every server, run by run (each against the first that answered).
    for ((run, q), per_server) in &answers {
        for b in per_server.iter().skip(1) {
            let a = &per_server[0];
            let what = format!("{q} equal on {} and {} (run {})", a.0.label(), b.0.label(), run + 1);
            match compare_series(&a.1, &b.1) {
                Ok(d) => {
                    s.checks.push(Check::pass(what, format!("{} buckets, max relative difference {d:.1e}", a.1.len())))
                }
                Err(e) => s.checks.push(Check::fail(what, e)),
            }
        }
    }
}

/// Query answers by (run, query name): each server's (bucket start, value) list.
type Answers = BTreeMap<(usize, &'static str), Vec<(Kind, Vec<(i64, f64)>)>>;

/// Tolerance for comparing query answers: rtsd stores a decimal that fits a float as OpenTSDB does (4-byte
/// float), VictoriaMetrics keeps it as a decimal; sums of a thousand such values agree to about 1e-7.
const REL_TOLERANCE: f64 = 1e-6;

fn compare_series(a: &[(i64, f64)], b: &[(i64, f64)]) -> Result<f64, String> {
    if a.len() != b.len() {
        return Err(format!("{} buckets vs {}", a.len(), b.len()));
    }
    let mut worst = 0.0f64;
    for (x, y) in a.iter().zip(b) {
        if x.0 != y.0 {
            return Err(format!("bucket {} vs {}", x.0, y.0));
        }
        let d = (x.1 - y.1).abs() / x.1.abs().max(y.1.abs()).max(1e-9);
        if d.is_nan() || d > REL_TOLERANCE {
            return Err(format!("at {}: {} vs {} (relative difference {d:.1e})", x.0, x.1, y.1));
        }
        worst = worst.max(d);
    }
    Ok(worst)
}

/// What an ingest measured.
struct Ingest {
    elapsed: Duration,
    stored: u64,
    cpu_s: Option<f64>,
    peak_rss_kib: Option<u64>,
    /// The server's own process alone (without a test bed's JVMs).
    cpu_own_s: Option<f64>,
    peak_rss_own_kib: Option<u64>,
    outcome: load::Outcome,
    writer_done: Option<Duration>,
}

/// How long an ingest may store nothing new after the clients sent everything before it is given up. On HBase a
/// data set's first points wait for its UIDs, each a few round trips to the cluster (rtsd-on-HBase assigned
/// ~6 per second on a loaded 2-core machine: A's 1,100 names took minutes before the first point was counted).
fn stall_limit(kind: Kind) -> Duration {
    Duration::from_secs(if kind.on_hbase() { 180 } else { 20 })
}

fn ingest(server: &mut Server, proto: Proto, wire: &Wire, expected: u64, min_rate: f64) -> Result<Ingest, String> {
    let limit = Duration::from_secs_f64(60.0 + expected as f64 / min_rate);
    let deadline = Instant::now() + limit;
    let base = server.stored(proto)?;
    let clients = match wire {
        Wire::Telnet(d) => Clients::telnet(server.telnet, d.clone(), deadline),
        Wire::Http(d) => Clients::http(server.http_put, d.clone(), deadline),
    }
    .map_err(|e| format!("connecting: {e}"))?;
    let cpu0 = server.cpu_seconds();
    let own0 = server.cpu_seconds_own();
    let t0 = clients.go();
    let mut last = (0u64, Instant::now());
    let (elapsed, stored) = loop {
        // A /metrics scrape costs the server CPU (VictoriaMetrics ~1 ms): look every 100 ms while the clients
        // send, then every 5 ms for the end.
        let busy = !clients.all_finished();
        std::thread::sleep(Duration::from_millis(if busy { 100 } else { 5 }));
        let n = server.stored(proto)?.saturating_sub(base);
        let now = Instant::now();
        if n >= expected {
            break (now - t0, n);
        }
        if n != last.0 {
            last = (n, now);
        }
        if now > deadline {
            break (now - t0, n);
        }
        if clients.all_finished() && now - last.1 > stall_limit(server.kind) {
            break (now - t0, n);
        }
        if !server.running() {
            return Err(format!("{} exited during ingest; log:\n{}", server.kind.label(), server.log_tail(20)));
        }
    };
    let cpu_s = cpu0.zip(server.cpu_seconds()).map(|(a, b)| b - a);
    let cpu_own_s = own0.zip(server.cpu_seconds_own()).map(|(a, b)| b - a);
    let peak_rss_kib = server.peak_rss_kib();
    let peak_rss_own_kib = server.peak_rss_kib_own();
    let outcome = clients.finish(Duration::from_secs(5));
    let writer_done = outcome.all_done_at().map(|t| t.saturating_duration_since(t0));
    // Anything counted beyond the points sent would be a counting bug: look once more.
    let stored = stored.max(server.stored(proto)?.saturating_sub(base));
    Ok(Ingest { elapsed, stored, cpu_s, peak_rss_kib, cpu_own_s, peak_rss_own_kib, outcome, writer_done })
}

#[allow(clippy::too_many_arguments)]
fn measure(
    opts: &Options,
    scenario: Scenario,
    kind: Kind,
    (set, wire): (&DataSet, &Wire),
    warm: Option<(&DataSet, &Wire)>,
    run: usize,
    s: &mut Session,
    answers: &mut Answers,
) -> Result<(), String> {
    let dir = opts.scratch.join(format!("{}-{}-run{}", scenario_key(scenario), kind.short(), run + 1));
    let mut server = match kind {
        Kind::Rtsd => Server::start(kind, &opts.rtsd, &dir)?,
        Kind::Vm => Server::start(kind, &opts.vm, &dir)?,
        Kind::OpenTsdb => Server::start(kind, &opts.scripts, &dir)?,
        Kind::RtsdHbase => Server::start_rtsd_hbase(&opts.rtsd, &opts.scripts, &dir, &[])?,
    };
    let proto = if scenario == Scenario::AHttp { Proto::Http } else { Proto::Telnet };
    let tag = format!("[run {}/{}] {} {}", run + 1, opts.runs, scenario.label(), kind.label());
    let key = scenario_key(scenario);
    if let Some((warm_set, warm_wire)) = warm {
        // The first burst on the fresh test bed: its JVMs (and OpenTSDB's) compile their hot paths meanwhile. Its
        // rate is kept beside the measured one, which follows once the cluster is idle again.
        let first = ingest(&mut server, proto, warm_wire, warm_set.points(), opts.min_rate)?;
        if first.stored != warm_set.points() {
            return Err(format!("first burst: only {} of {} points stored", first.stored, warm_set.points()));
        }
        let rate = first.stored as f64 / first.elapsed.as_secs_f64();
        if scenario != Scenario::B {
            s.samples.add(&format!("{key}.rate_first"), kind, rate);
        }
        let waited = server.wait_quiet(Duration::from_secs(300))?;
        eprintln!(
            "{tag}: first burst (other names) {} points/s; cluster quiet {:.0} s later",
            report::si(rate),
            waited.as_secs_f64()
        );
    }
    let ing = ingest(&mut server, proto, wire, set.points(), opts.min_rate)?;
    let cpu_ingested = server.cpu_seconds();
    if kind == Kind::RtsdHbase {
        // What the ingest cost rtsd (UIDs assigned, engine write latencies), kept beside the measurement.
        if let Ok(m) = server.metrics() {
            let _ = std::fs::write(dir.join("metrics-after-ingest.txt"), m);
        }
    }
    let rate = ing.stored as f64 / ing.elapsed.as_secs_f64();
    let secs = |c: Option<f64>| c.map(|c| format!("{c:.2} s")).unwrap_or("-".into());
    let mib = |k: Option<u64>| k.map(|k| format!("{:.0} MiB", k as f64 / 1024.0)).unwrap_or("-".into());
    eprintln!(
        "{tag}: {} of {} points stored in {:.2} s = {} points/s (client done at {}), server CPU {}, peak RSS {}{}",
        ing.stored,
        set.points(),
        ing.elapsed.as_secs_f64(),
        report::si(rate),
        ing.writer_done.map(|d| format!("{:.2} s", d.as_secs_f64())).unwrap_or("-".into()),
        secs(ing.cpu_s),
        mib(ing.peak_rss_kib),
        if kind.on_hbase() {
            format!(" (its own process alone: CPU {}, peak RSS {})", secs(ing.cpu_own_s), mib(ing.peak_rss_own_kib))
        } else {
            String::new()
        },
    );
    let all_stored = ing.stored == set.points();
    s.checks.push(Check::new(
        all_stored,
        format!("{tag}: every point stored"),
        format!("{} of {} counted by the server", ing.stored, set.points()),
    ));
    let errors = ing.outcome.errors();
    if !errors.is_empty() {
        s.checks.push(Check::fail(format!("{tag}: connections"), errors.join("; ")));
    }
    match wire {
        Wire::Telnet(_) => s.checks.push(Check::new(
            ing.outcome.reply_bytes() == 0,
            format!("{tag}: nothing sent back on telnet connections"),
            match ing.outcome.first_reply() {
                Some(r) => format!("{} bytes, first: {:?}", ing.outcome.reply_bytes(), r.lines().next().unwrap_or("")),
                None => "0 bytes".into(),
            },
        )),
        Wire::Http(_) => s.checks.push(Check::new(
            ing.outcome.requests_failed() == 0,
            format!("{tag}: every /api/put answered 2xx"),
            format!(
                "{} ok, {} failed{}",
                ing.outcome.requests_ok(),
                ing.outcome.requests_failed(),
                ing.outcome.first_failure().map(|f| format!(", first: {f}")).unwrap_or_default()
            ),
        )),
    }
    if !all_stored {
        return Err(format!("only {} of {} points stored; log:\n{}", ing.stored, set.points(), server.log_tail(10)));
    }
    s.samples.add(&format!("{key}.rate"), kind, rate);
    if let Some(c) = ing.cpu_s.filter(|c| *c > 0.0) {
        s.samples.add(&format!("{key}.per_cpu"), kind, ing.stored as f64 / c);
    }
    if let Some(k) = ing.peak_rss_kib {
        s.samples.add(&format!("{key}.rss"), kind, k as f64 / 1024.0);
    }
    if let Some(c) = ing.cpu_own_s.filter(|c| *c > 0.0) {
        s.samples.add(&format!("{key}.per_cpu_own"), kind, ing.stored as f64 / c);
    }
    if let Some(k) = ing.peak_rss_own_kib {
        s.samples.add(&format!("{key}.rss_own"), kind, k as f64 / 1024.0);
    }
    if scenario == Scenario::AHttp {
        server.stop(Duration::from_secs(120))?;
        return Ok(());
    }
    if scenario == Scenario::B {
        // A dashboard opened right after heavy ingest (issue 22 item 5): q1 once, before the server settles, where
        // the warm figures below are taken after it settled.
        // With it, as a dashboard's panels are asked together, q2 (one host: a literal tag filter, whose series
        // come from the series index).
        let (q1, q2) = std::thread::scope(|scope| {
            let q2 = scope.spawn(|| first_query_ms(&server, set, Some(&[q2_host(set)])));
            (first_query_ms(&server, set, None), q2.join().expect("q2 thread"))
        });
        let (q1, q2) = (q1?, q2?);
        eprintln!("{tag}: q1 first answer right after the burst {q1:.2} ms; q2 beside it {q2:.2} ms");
        s.samples.add("b.q1_first", kind, q1);
        s.samples.add("b.q2_first", kind, q2);
    }
    let months = months(set.first_ts(), set.last_ts);
    let t = Instant::now();
    server.flush_and_merge(&months, Duration::from_secs(600))?;
    if kind == Kind::Vm {
        eprintln!("{tag}: force_flush + force_merge {:?} took {:.2} s", months, t.elapsed().as_secs_f64());
    }
    // The whole cost of the points: the ingest and what the server did with them until settled (rtsd's flushes,
    // compactions and rollup fold; VictoriaMetrics' forced merge).
    if let (Some(during), Some(at), Some(now)) = (ing.cpu_s, cpu_ingested, server.cpu_seconds()) {
        let settled = during + (now - at);
        eprintln!("{tag}: server CPU {settled:.2} s until settled");
        s.samples.add(&format!("{key}.cpu_settled"), kind, settled);
        s.samples.add(&format!("{key}.per_cpu_settled"), kind, set.points() as f64 / settled);
    }
    if scenario == Scenario::B {
        // q1: every host; q2: one host; q3: a `literal_or` of 20 hosts spread over the set (issue 3 item 6).
        let one = [q2_host(set)];
        let twenty: Vec<u32> = (0..20.min(set.hosts)).map(|i| i * set.hosts / 20.min(set.hosts)).collect();
        for (q, hosts) in [("q1", None), ("q2", Some(&one[..])), ("q3", Some(&twenty[..]))] {
            let (ms, answer) = query_latency(&server, set, hosts, opts.q_repeats)?;
            let expected = set.expected_sum_of_avgs(hosts);
            let what = format!("{tag}: {q} answers what was sent");
            match compare_series(&answer, &expected) {
                Ok(d) => s
                    .checks
                    .push(Check::pass(what, format!("{} buckets, max relative difference {d:.1e}", answer.len()))),
                Err(e) => s.checks.push(Check::fail(what, e)),
            }
            eprintln!("{tag}: {q} median {ms:.2} ms over {} runs ({} buckets)", opts.q_repeats, answer.len());
            if q == "q1" && matches!(kind, Kind::Rtsd | Kind::RtsdHbase) {
                // Where rtsd's q1 time goes: its statsSummary, kept beside the measurement (see --keep).
                let path = format!("{}&show_stats", query_path(kind, set, hosts));
                if let Ok(r) = http::get(server.api, &path, Duration::from_secs(300)) {
                    let _ = std::fs::write(dir.join("q1-show-stats.json"), &r.body);
                    let text = r.text();
                    let summary = text.find("\"statsSummary\"").map(|i| &text[i..]).unwrap_or("");
                    eprintln!("{tag}: q1 statsSummary {}", summary.chars().take(1500).collect::<String>());
                }
            }
            s.samples.add(&format!("b.{q}"), kind, ms);
            answers.entry((run, q)).or_default().push((kind, answer));
        }
        match visibility(&server, opts.probes) {
            Ok(v) => {
                let mut sorted = v.clone();
                sorted.sort_by(f64::total_cmp);
                eprintln!(
                    "{tag}: acknowledged point visible after {:?} ms",
                    v.iter().map(|x| (x * 10.0).round() / 10.0).collect::<Vec<_>>()
                );
                s.samples.add("b.visible", kind, report::median(&v));
                s.samples.add("b.visible_max", kind, sorted.last().copied().unwrap_or(f64::NAN));
            }
            Err(e) => s.checks.push(Check::fail(format!("{tag}: acknowledged point becomes visible"), e)),
        }
    }
    server.stop(Duration::from_secs(300))?;
    let (disk, apparent) = server::du(&server.disk_dir())?;
    // Per point stored: the first burst's points are on the test bed's disk too.
    let points = set.points() + warm.map_or(0, |(w, _)| w.points());
    eprintln!(
        "{tag}: after flush{} and stop: du {} bytes ({} apparent) = {:.2} bytes/point ({points} points)",
        if kind == Kind::Vm { " + merge" } else { "" },
        disk,
        apparent,
        disk as f64 / points as f64
    );
    s.samples.add(&format!("{key}.disk"), kind, disk as f64 / points as f64);
    if !opts.keep {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(())
}

/// The prefix of every name in a test bed's first burst (see [`DataSet::renamed`]).
const WARM_NAMES: &str = "w";

fn scenario_key(s: Scenario) -> &'static str {
    match s {
        Scenario::ATelnet => "a_telnet",
        Scenario::AHttp => "a_http",
        Scenario::B => "b",
        Scenario::AImport => "a_import",
    }
}

/// [`Scenario::AImport`]: the data set's lines (telnet `put` lines without the `put` word, OpenTSDB's import
/// format) written to a file once, then imported by rtsd into a fresh data directory per run.
fn run_import_scenario(opts: &Options, set: &DataSet, s: &mut Session) {
    if !opts.servers.contains(&Kind::Rtsd) {
        return;
    }
    let t = Instant::now();
    let file = opts.scratch.join("a-import.txt");
    let written = (|| -> std::io::Result<u64> {
        let mut out = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&file)?);
        let mut bytes = 0u64;
        for buf in set.render_telnet(1) {
            for line in buf.split_inclusive(|&b| b == b'\n') {
                let line = line.strip_prefix(b"put ").unwrap_or(line);
                std::io::Write::write_all(&mut out, line)?;
                bytes += line.len() as u64;
            }
        }
        std::io::Write::flush(&mut out)?;
        Ok(bytes)
    })();
    let bytes = match written {
        Ok(b) => b,
        Err(e) => return s.checks.push(Check::fail("A import: writing the input file", e.to_string())),
    };
    let desc = format!(
        "A import: {}, {:.1} MB of import lines written in {:.1} s",
        set.describe(),
        bytes as f64 / 1e6,
        t.elapsed().as_secs_f64(),
    );
    eprintln!("{desc}");
    s.sets.push(desc);
    for run in 0..opts.runs {
        let tag = format!("[run {}/{}] A import rtsd", run + 1, opts.runs);
        if let Err(e) = measure_import(opts, set, &file, run, &tag, s) {
            eprintln!("{tag}: FAILED: {e}");
            s.checks.push(Check::fail(tag, e));
        }
    }
    let _ = std::fs::remove_file(&file);
}

/// One `rtsd import`: wall time from its start to its exit (every point written and synced), its CPU time and
/// peak RSS, and the directory's size.
fn measure_import(
    opts: &Options,
    set: &DataSet,
    file: &Path,
    run: usize,
    tag: &str,
    s: &mut Session,
) -> Result<(), String> {
    let dir = opts.scratch.join(format!("a_import-rtsd-run{}", run + 1));
    let _ = std::fs::remove_dir_all(&dir);
    let cpu0 = server::children_cpu_seconds();
    let t0 = Instant::now();
    let mut child = std::process::Command::new(&opts.rtsd)
        .arg("import")
        .arg("--data-dir")
        .arg(&dir)
        .arg(file)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting {}: {e}", opts.rtsd.display()))?;
    // The peak RSS is a high-water mark: its last reading before the exit is the peak, within a few ms.
    let pid = child.id();
    let mut peak_kib = 0u64;
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            break status;
        }
        if let Some(k) = server::peak_rss_kib_of(pid) {
            peak_kib = peak_kib.max(k);
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let elapsed = t0.elapsed();
    let cpu = server::children_cpu_seconds().zip(cpu0).map(|(b, a)| b - a);
    let mut log = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut log);
    }
    let summary = format!("Total: imported {} data points", set.points());
    let ok = status.success() && log.contains(&summary);
    s.checks.push(Check::new(ok, format!("{tag}: every point imported"), log.lines().last().unwrap_or("").to_string()));
    if !ok {
        return Err(format!("{status}; log: {}", log.lines().rev().take(5).collect::<Vec<_>>().join(" / ")));
    }
    let rate = set.points() as f64 / elapsed.as_secs_f64();
    let (disk, _) = server::du(&dir)?;
    eprintln!(
        "{tag}: {} points in {:.2} s = {} points/s, CPU {}, peak RSS {:.0} MiB, du {disk} bytes = {:.2} bytes/point",
        set.points(),
        elapsed.as_secs_f64(),
        report::si(rate),
        cpu.map(|c| format!("{c:.2} s")).unwrap_or("-".into()),
        peak_kib as f64 / 1024.0,
        disk as f64 / set.points() as f64,
    );
    s.samples.add("a_import.rate", Kind::Rtsd, rate);
    if let Some(c) = cpu.filter(|c| *c > 0.0) {
        s.samples.add("a_import.per_cpu", Kind::Rtsd, set.points() as f64 / c);
    }
    s.samples.add("a_import.rss", Kind::Rtsd, peak_kib as f64 / 1024.0);
    s.samples.add("a_import.disk", Kind::Rtsd, disk as f64 / set.points() as f64);
    if !opts.keep {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(())
}

/// `YYYY_MM` of every month from `first` to `last` (VictoriaMetrics' partition names).
fn months(first: i64, last: i64) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut t = first;
    loop {
        let (y, m, _) = civil(t.min(last));
        let name = format!("{y:04}_{m:02}");
        if out.last() != Some(&name) {
            out.push(name);
        }
        if t >= last {
            return out;
        }
        t += 86_400;
    }
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
pub fn civil(t: i64) -> (i64, u32, u32) {
    let z = t.div_euclid(86_400) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

fn enc(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The request path for `kind` of `sum:1m-avg` over `hosts` (all when `None`): q1 (all), q2 (one host), q3 (a
/// `literal_or` of several; VictoriaMetrics: a regexp alternation, its equivalent).
fn query_path(kind: Kind, set: &DataSet, hosts: Option<&[u32]>) -> String {
    let metric = data::metric_name(0);
    let last_bucket = set.last_ts - set.last_ts.rem_euclid(60);
    let names = |sep: &str| hosts.map(|h| h.iter().map(|&h| data::host_name(h)).collect::<Vec<_>>().join(sep));
    match kind {
        Kind::Rtsd | Kind::RtsdHbase | Kind::OpenTsdb => {
            let filter = match (hosts, names("|")) {
                (Some([_]), Some(name)) => format!("{{host={name}}}"),
                // In the second braces: a filter that does not group by host.
                (Some(_), Some(names)) => format!("{{}}{{host=literal_or({names})}}"),
                _ => String::new(),
            };
            format!(
                "/api/query?start={}&end={}&m={}",
                set.first_ts(),
                set.last_ts,
                enc(&format!("sum:1m-avg:{metric}{filter}"))
            )
        }
        Kind::Vm => {
            let filter = match (hosts, names("|")) {
                (Some([_]), Some(name)) => format!(",host=\"{name}\""),
                (Some(_), Some(names)) => format!(",host=~\"{names}\""),
                _ => String::new(),
            };
            // VictoriaMetrics' window at T is (T-60 s, T]; OpenTSDB's bucket t is [t, t+60 s): T = t + 59 s.
            format!(
                "/api/v1/query_range?query={}&start={}&end={}&step=60&nocache=1",
                enc(&format!("sum(avg_over_time({{__name__=\"{metric}\"{filter}}}[1m]))")),
                set.first_ts() + 59,
                last_bucket + 59
            )
        }
    }
}

/// Parses a query answer into (bucket start, value), sorted.
fn parse_answer(kind: Kind, body: &[u8]) -> Result<Vec<(i64, f64)>, String> {
    let v: serde_json::Value = serde_json::from_slice(body).map_err(|e| format!("answer is not JSON: {e}"))?;
    let mut out = Vec::new();
    match kind {
        Kind::Rtsd | Kind::RtsdHbase | Kind::OpenTsdb => {
            let arr = v.as_array().ok_or("answer is not an array")?;
            if arr.len() != 1 {
                return Err(format!("{} result groups, expected 1", arr.len()));
            }
            let dps = arr[0]["dps"].as_object().ok_or("no dps object")?;
            for (ts, val) in dps {
                out.push((
                    ts.parse().map_err(|_| format!("bad timestamp {ts}"))?,
                    val.as_f64().ok_or("non-numeric value")?,
                ));
            }
        }
        Kind::Vm => {
            let result = v["data"]["result"].as_array().ok_or("no data.result")?;
            if result.len() != 1 {
                return Err(format!("{} result series, expected 1", result.len()));
            }
            for pair in result[0]["values"].as_array().ok_or("no values")? {
                let ts = pair[0].as_f64().ok_or("bad timestamp")? as i64 - 59;
                let val: f64 = pair[1].as_str().and_then(|s| s.parse().ok()).ok_or("bad value")?;
                out.push((ts, val));
            }
        }
    }
    out.sort_by_key(|p| p.0);
    Ok(out)
}

/// q2's one host.
fn q2_host(set: &DataSet) -> u32 {
    (set.hosts - 1).min(42)
}

/// One query over `hosts` (see [`query_path`]), timed: the server's first answer to it.
fn first_query_ms(server: &Server, set: &DataSet, hosts: Option<&[u32]>) -> Result<f64, String> {
    let path = query_path(server.kind, set, hosts);
    let t = Instant::now();
    let r = http::get(server.api, &path, Duration::from_secs(300)).map_err(|e| format!("query {path}: {e}"))?;
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    if r.status != 200 {
        return Err(format!("query {path} answered {}: {}", r.status, &r.text()[..r.body.len().min(300)]));
    }
    Ok(ms)
}

/// Runs a query once to warm up, then `repeats` times; returns the median latency (ms) and the answer.
fn query_latency(
    server: &Server,
    set: &DataSet,
    hosts: Option<&[u32]>,
    repeats: usize,
) -> Result<(f64, Vec<(i64, f64)>), String> {
    let path = query_path(server.kind, set, hosts);
    let mut times = Vec::new();
    let mut answer = Vec::new();
    for i in 0..=repeats {
        let t = Instant::now();
        let r = http::get(server.api, &path, Duration::from_secs(300)).map_err(|e| format!("query {path}: {e}"))?;
        let el = t.elapsed();
        if r.status != 200 {
            return Err(format!("query {path} answered {}: {}", r.status, &r.text()[..r.body.len().min(300)]));
        }
        if i == 0 {
            answer = parse_answer(server.kind, &r.body)?;
        } else {
            times.push(el.as_secs_f64() * 1000.0);
        }
    }
    Ok((report::median(&times), answer))
}

/// Writes one point with `/api/put` and, once acknowledged, queries until it is seen. The first probe creates
/// the series and is not counted; then `probes` points of the same series, each timed from the acknowledgement.
fn visibility(server: &Server, probes: usize) -> Result<Vec<f64>, String> {
    let base = now_s() - 300;
    let mut out = Vec::new();
    for i in 0..=probes {
        let ts = base + i as i64;
        let value = 1000 + i as i64;
        let body =
            format!(r#"{{"metric":"bench.visible","timestamp":{ts},"value":{value},"tags":{{"host":"probe"}}}}"#);
        let r = http::post(server.http_put, "/api/put", body.as_bytes(), Duration::from_secs(30))
            .map_err(|e| format!("put: {e}"))?;
        let acked = Instant::now();
        if !(200..300).contains(&r.status) {
            return Err(format!("put answered {}: {}", r.status, r.text()));
        }
        let path = match server.kind {
            Kind::Rtsd | Kind::RtsdHbase | Kind::OpenTsdb => {
                format!("/api/query?start={}&end={}&m={}", ts - 1, ts + 1, enc("sum:bench.visible{host=probe}"))
            }
            Kind::Vm => format!(
                "/api/v1/query_range?query={}&start={ts}&end={ts}&step=1&nocache=1",
                enc("{__name__=\"bench.visible\",host=\"probe\"}")
            ),
        };
        let limit = Duration::from_secs(30);
        let mut conn = http::Conn::connect(server.api, limit).map_err(|e| format!("connect: {e}"))?;
        let seen = loop {
            let r = match conn.get(&path) {
                Ok(r) => r,
                Err(_) => {
                    conn = http::Conn::connect(server.api, limit).map_err(|e| format!("connect: {e}"))?;
                    conn.get(&path).map_err(|e| format!("query: {e}"))?
                }
            };
            let found = r.status == 200 && sees(server.kind, &r.body, ts, value);
            if found {
                break acked.elapsed();
            }
            if acked.elapsed() > limit {
                return Err(format!("point {i} not visible {limit:?} after its acknowledgement"));
            }
            std::thread::sleep(Duration::from_millis(2));
        };
        if i > 0 {
            out.push(seen.as_secs_f64() * 1000.0);
        }
    }
    Ok(out)
}

fn sees(kind: Kind, body: &[u8], ts: i64, value: i64) -> bool {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(body) else { return false };
    match kind {
        Kind::Rtsd | Kind::RtsdHbase | Kind::OpenTsdb => v
            .as_array()
            .and_then(|a| a.first())
            .and_then(|g| g["dps"].get(ts.to_string()))
            .and_then(|x| x.as_f64())
            .is_some_and(|x| x == value as f64),
        Kind::Vm => v["data"]["result"]
            .as_array()
            .and_then(|a| a.first())
            .and_then(|s| s["values"].as_array()?.first().cloned())
            .is_some_and(|p| p[0].as_f64() == Some(ts as f64) && p[1].as_str() == Some(&value.to_string())),
    }
}

/// Just the generator against discard sinks, for every scenario.
pub fn sink_only(opts: &Options) -> Result<(), String> {
    let last_ts = data::default_last_ts(now_s());
    for &scenario in &opts.scenarios {
        let set = match scenario {
            Scenario::B => DataSet::b(opts.scale, opts.hosts, last_ts),
            _ => DataSet::a(opts.scale, opts.hosts, last_ts),
        };
        let t = Instant::now();
        let (rate, el) = if scenario == Scenario::AHttp {
            let d = Arc::new(set.render_http(opts.conns, opts.per_request));
            eprintln!(
                "rendered {} requests in {:.2} s",
                d.iter().map(Vec::len).sum::<usize>(),
                t.elapsed().as_secs_f64()
            );
            load::sink_check_http(d, set.points())
        } else {
            let d = Arc::new(set.render_telnet(opts.conns));
            eprintln!(
                "rendered {:.1} MB in {:.2} s",
                d.iter().map(|b| b.len()).sum::<usize>() as f64 / 1e6,
                t.elapsed().as_secs_f64()
            );
            load::sink_check_telnet(d, set.points())
        }
        .map_err(|e| e.to_string())?;
        println!(
            "generator, {} into a discard sink: {} points/s ({:.2} s for {} points, {} connections)",
            scenario.label(),
            report::si(rate),
            el.as_secs_f64(),
            set.points(),
            opts.conns
        );
    }
    Ok(())
}

/// The default scratch directory.
pub fn default_scratch() -> PathBuf {
    std::env::temp_dir().join(format!("rtsd-bench-{}", std::process::id()))
}

/// The workspace root (the bench crate's parent).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("."))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn months_and_civil_dates() {
        assert_eq!(civil(0), (1970, 1, 1));
        assert_eq!(civil(1_795_302_480), (2026, 11, 21));
        assert_eq!(civil(951_782_400), (2000, 2, 29));
        let end = 1_795_302_480;
        assert_eq!(months(end - 86_390, end), ["2026_11"]);
        // 2026-12-01 00:00:30 UTC: one day back crosses into November.
        assert_eq!(months(1_796_083_230 - 86_400, 1_796_083_230), ["2026_11", "2026_12"]);
    }

    #[test]
    fn query_paths() {
        let set = DataSet { name: "B", metrics: 4, hosts: 1000, rounds: 12, last_ts: 1_795_302_470, names: "" };
        assert_eq!(
            query_path(Kind::Rtsd, &set, Some(&[42])),
            "/api/query?start=1795302360&end=1795302470&m=sum%3A1m-avg%3Asys.cpu.user%7Bhost%3Dhost00042%7D"
        );
        assert_eq!(
            query_path(Kind::Rtsd, &set, Some(&[1, 50])),
            "/api/query?start=1795302360&end=1795302470&m=sum%3A1m-avg%3Asys.cpu.user%7B%7D%7Bhost%3Dliteral_or%28host00001%7Chost00050%29%7D"
        );
        let vm3 = query_path(Kind::Vm, &set, Some(&[1, 50]));
        assert!(vm3.contains("%2Chost%3D~%22host00001%7Chost00050%22%7D"), "{vm3}");
        let vm = query_path(Kind::Vm, &set, None);
        assert!(vm.ends_with("&start=1795302419&end=1795302479&step=60&nocache=1"), "{vm}");
        assert!(vm.contains("sum%28avg_over_time%28%7B__name__%3D%22sys.cpu.user%22%7D%5B1m%5D%29%29"), "{vm}");
    }

    #[test]
    fn answers_parse_to_bucket_starts() {
        let rtsd =
            br#"[{"metric":"q","tags":{},"aggregateTags":["host"],"dps":{"1795312260":656.5,"1795312200":252.5}}]"#;
        assert_eq!(parse_answer(Kind::Rtsd, rtsd).unwrap(), [(1_795_312_200, 252.5), (1_795_312_260, 656.5)]);
        let vm = br#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1795312259,"252.5"],[1795312319,"656.5"]]}]}}"#;
        assert_eq!(parse_answer(Kind::Vm, vm).unwrap(), [(1_795_312_200, 252.5), (1_795_312_260, 656.5)]);
        assert!(compare_series(&[(1, 1.0)], &[(1, 1.0 + 1e-9)]).is_ok());
        assert!(compare_series(&[(1, 1.0)], &[(1, 1.001)]).is_err());
        assert!(compare_series(&[(1, 1.0)], &[(2, 1.0)]).is_err());
    }

    #[test]
    fn probes_are_recognised() {
        assert!(sees(Kind::Rtsd, br#"[{"metric":"bench.visible","dps":{"99":1000,"100":1001}}]"#, 100, 1001));
        assert!(!sees(Kind::Rtsd, br#"[{"metric":"bench.visible","dps":{"99":1000}}]"#, 100, 1001));
        assert!(sees(Kind::Vm, br#"{"data":{"result":[{"values":[[100,"1001"]]}]}}"#, 100, 1001));
        assert!(!sees(Kind::Vm, br#"{"data":{"result":[{"values":[[100,"1000"]]}]}}"#, 100, 1001));
        assert!(!sees(Kind::Vm, br#"{"data":{"result":[]}}"#, 100, 1001));
    }
}
