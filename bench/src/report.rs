//! Samples, medians, ratios against the bar, correctness checks, and the `RESULTS.md` entry.

use crate::runner::{civil, Options, Session};
use crate::server::Kind;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Every value measured, by figure key and server.
#[derive(Debug, Default)]
pub struct Samples {
    map: BTreeMap<(String, Kind), Vec<f64>>,
}

impl Samples {
    pub fn add(&mut self, key: &str, kind: Kind, v: f64) {
        if v.is_finite() {
            self.map.entry((key.to_string(), kind)).or_default().push(v);
        }
    }
    pub fn get(&self, key: &str, kind: Kind) -> &[f64] {
        self.map.get(&(key.to_string(), kind)).map(Vec::as_slice).unwrap_or(&[])
    }
}

/// A correctness check's outcome.
#[derive(Debug, Clone)]
pub struct Check {
    pub ok: bool,
    pub what: String,
    pub detail: String,
}

impl Check {
    pub fn new(ok: bool, what: impl Into<String>, detail: impl Into<String>) -> Check {
        Check { ok, what: what.into(), detail: detail.into() }
    }
    pub fn pass(what: impl Into<String>, detail: impl Into<String>) -> Check {
        Check::new(true, what, detail)
    }
    pub fn fail(what: impl Into<String>, detail: impl Into<String>) -> Check {
        Check::new(false, what, detail)
    }
}

/// What the bar asks of a figure.
#[derive(Debug, Clone, Copy)]
enum Bar {
    None,
    /// rtsd/VM at least this.
    RatioAtLeast(f64),
    /// rtsd/VM at most this.
    RatioAtMost(f64),
    /// rtsd's own value at most this.
    AbsAtMost(f64),
}

struct Figure {
    key: &'static str,
    label: &'static str,
    bar: Bar,
}

/// Figures of the server's own process alone, which differ from the whole only on an HBase test bed: in the pair
/// tables, not in the rtsd/VM table.
const OWN: &[Figure] = &[
    Figure {
        key: "a_telnet.per_cpu_own",
        label: "points per CPU-second of the TSD process alone, A telnet",
        bar: Bar::None,
    },
    Figure {
        key: "a_http.per_cpu_own",
        label: "points per CPU-second of the TSD process alone, A HTTP",
        bar: Bar::None,
    },
    Figure { key: "b.per_cpu_own", label: "points per CPU-second of the TSD process alone, B telnet", bar: Bar::None },
    Figure { key: "a_telnet.rss_own", label: "peak RSS of the TSD process alone, A telnet (MiB)", bar: Bar::None },
    Figure { key: "a_http.rss_own", label: "peak RSS of the TSD process alone, A HTTP (MiB)", bar: Bar::None },
    Figure { key: "b.rss_own", label: "peak RSS of the TSD process alone, B (MiB)", bar: Bar::None },
];

/// The pairs compared figure by figure when both ran: (subject, peer), the ratio subject/peer.
pub const PAIRS: &[(Kind, Kind)] =
    &[(Kind::Rtsd, Kind::OpenTsdb), (Kind::RtsdHbase, Kind::OpenTsdb), (Kind::RtsdHbase, Kind::Rtsd)];

/// The bar a pair's figure has: issue 21 item 5 for rtsd-on-HBase against OpenTSDB on the same test bed (at least
/// 5x its ingest rates, at most 0.5x its q1 latency). The spec's other bars are against VictoriaMetrics.
fn pair_bar(subject: Kind, peer: Kind, key: &str) -> Bar {
    match (subject, peer, key) {
        (Kind::RtsdHbase, Kind::OpenTsdb, "a_telnet.rate" | "a_http.rate" | "b.rate") => Bar::RatioAtLeast(5.0),
        (Kind::RtsdHbase, Kind::OpenTsdb, "b.q1") => Bar::RatioAtMost(0.5),
        _ => Bar::None,
    }
}

/// A server's column title in a pair table: rtsd beside rtsd-on-HBase is rtsd-on-RocksDB.
fn column(kind: Kind, other: Kind) -> &'static str {
    match (kind, other) {
        (Kind::Rtsd, Kind::RtsdHbase) => "rtsd-on-RocksDB",
        _ => kind.label(),
    }
}

const FIGURES: &[Figure] = &[
    Figure { key: "a_telnet.rate", label: "telnet put ingest, A (points/s)", bar: Bar::RatioAtLeast(1.5) },
    Figure { key: "a_http.rate", label: "HTTP /api/put ingest, A (points/s)", bar: Bar::RatioAtLeast(1.5) },
    Figure { key: "b.rate", label: "telnet put ingest, B (points/s)", bar: Bar::None },
    // On a test bed only: the burst before the measured one, on the cluster's cold JVMs (see runner::measure).
    Figure {
        key: "a_telnet.rate_first",
        label: "telnet put ingest, A's shape, first burst on a fresh test bed (points/s)",
        bar: Bar::None,
    },
    Figure {
        key: "a_http.rate_first",
        label: "HTTP /api/put ingest, A's shape, first burst on a fresh test bed (points/s)",
        bar: Bar::None,
    },
    Figure { key: "a_telnet.per_cpu", label: "points per server CPU-second, A telnet", bar: Bar::None },
    Figure { key: "a_http.per_cpu", label: "points per server CPU-second, A HTTP", bar: Bar::None },
    Figure { key: "b.per_cpu", label: "points per server CPU-second, B telnet", bar: Bar::None },
    Figure { key: "b.disk", label: "disk bytes/point after flush, B", bar: Bar::RatioAtMost(1.0) },
    // Issue 22: A at most 1.5x VictoriaMetrics (fixed costs per series weigh more with 100 points a series).
    Figure { key: "a_telnet.disk", label: "disk bytes/point after flush, A", bar: Bar::RatioAtMost(1.5) },
    Figure { key: "a_telnet.cpu_settled", label: "server CPU-s for A telnet until settled", bar: Bar::None },
    Figure { key: "b.cpu_settled", label: "server CPU-s for B until settled", bar: Bar::None },
    Figure { key: "a_telnet.rss", label: "peak RSS during A telnet ingest (MiB)", bar: Bar::RatioAtMost(1.0) },
    Figure { key: "a_http.rss", label: "peak RSS during A HTTP ingest (MiB)", bar: Bar::RatioAtMost(1.0) },
    Figure { key: "b.rss", label: "peak RSS during B ingest (MiB)", bar: Bar::None },
    Figure { key: "b.q1_first", label: "q1 first answer right after B's burst (ms)", bar: Bar::RatioAtMost(1.0) },
    // Another panel of the dashboard, asked together with q1's first: issue 22 item 5 sets its bar on q1 only;
    // this one says whether queries with literal tag filters wait for the burst's last flush.
    Figure { key: "b.q2_first", label: "q2 first answer, asked with q1's (ms)", bar: Bar::None },
    Figure { key: "b.q1", label: "q1 latency, B warm (ms)", bar: Bar::RatioAtMost(0.5) },
    Figure { key: "b.q2", label: "q2 latency, B warm (ms)", bar: Bar::RatioAtMost(1.0) },
    Figure { key: "b.q3", label: "q3 (literal_or of 20 hosts) latency, B warm (ms)", bar: Bar::RatioAtMost(1.0) },
    Figure {
        key: "b.visible",
        label: "acknowledged point visible to a query, median (ms)",
        bar: Bar::AbsAtMost(1000.0),
    },
    Figure {
        key: "b.visible_max",
        label: "acknowledged point visible to a query, worst (ms)",
        bar: Bar::AbsAtMost(1000.0),
    },
];

/// The median (mean of the middle two for an even count); NaN for none.
pub fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// `1.52 M`, `158 k`, `83.1`, `0.962`.
pub fn si(v: f64) -> String {
    let a = v.abs();
    if !v.is_finite() {
        "-".into()
    } else if a >= 1e6 {
        format!("{:.2} M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0} k", v / 1e3)
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

fn cell(v: &[f64]) -> String {
    match v.len() {
        0 => "-".into(),
        1 => si(v[0]),
        _ => {
            let (lo, hi) = v.iter().fold((f64::MAX, f64::MIN), |(l, h), x| (l.min(*x), h.max(*x)));
            format!("{} ({}–{})", si(median(v)), si(lo), si(hi))
        }
    }
}

/// The table of medians (with ranges), ratios and the bar, as Markdown.
pub fn table(samples: &Samples, servers: &[Kind]) -> String {
    let both = servers.contains(&Kind::Rtsd) && servers.contains(&Kind::Vm);
    let mut out =
        String::from("| figure | rtsd | VictoriaMetrics | rtsd/VM | bar | verdict |\n|---|---|---|---|---|---|\n");
    for f in FIGURES {
        let (r, v) = (samples.get(f.key, Kind::Rtsd), samples.get(f.key, Kind::Vm));
        if r.is_empty() && v.is_empty() {
            continue;
        }
        let ratio = if both && !r.is_empty() && !v.is_empty() { median(r) / median(v) } else { f64::NAN };
        let (bar, verdict) = match f.bar {
            Bar::None => (String::new(), String::new()),
            Bar::RatioAtLeast(x) => (format!(">= {x}x"), verdict(ratio, ratio >= x)),
            Bar::RatioAtMost(x) => (format!("<= {x}x"), verdict(ratio, ratio <= x)),
            Bar::AbsAtMost(x) => (format!("rtsd <= {}", si(x)), verdict(median(r), median(r) <= x)),
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            f.label,
            cell(r),
            cell(v),
            match ratio {
                r if !r.is_finite() => "-".into(),
                r if r < 0.1 => format!("{r:.4}x"),
                r => format!("{r:.2}x"),
            },
            bar,
            verdict
        ));
    }
    out
}

/// `subject` against `peer` as Markdown, figure by figure with the ratio subject/peer, and the pair's bar where it
/// has one ([`pair_bar`]); `None` when the peer measured nothing.
pub fn pair_table(samples: &Samples, subject: Kind, peer: Kind) -> Option<String> {
    let (a, b) = (column(subject, peer), column(peer, subject));
    let bars = FIGURES.iter().any(|f| !matches!(pair_bar(subject, peer, f.key), Bar::None));
    let mut out = if bars {
        format!("| figure | {a} | {b} | {a}/{b} | bar | verdict |\n|---|---|---|---|---|---|\n")
    } else {
        format!("| figure | {a} | {b} | {a}/{b} |\n|---|---|---|---|\n")
    };
    let mut any = false;
    for f in FIGURES.iter().chain(OWN) {
        let (r, p) = (samples.get(f.key, subject), samples.get(f.key, peer));
        if p.is_empty() {
            continue;
        }
        // The own-process rows say something only where one side ran on a test bed.
        if OWN.iter().any(|o| o.key == f.key) && !(subject.on_hbase() || peer.on_hbase()) {
            continue;
        }
        any = true;
        let ratio = if r.is_empty() { f64::NAN } else { median(r) / median(p) };
        let shown = match ratio {
            x if !x.is_finite() => "-".into(),
            x if x < 0.1 => format!("{x:.4}x"),
            x => format!("{x:.2}x"),
        };
        out.push_str(&format!("| {} | {} | {} | {shown} |", f.label, cell(r), cell(p)));
        if bars {
            let (bar, verdict) = match pair_bar(subject, peer, f.key) {
                Bar::RatioAtLeast(x) => (format!(">= {x}x"), verdict(ratio, ratio >= x)),
                Bar::RatioAtMost(x) => (format!("<= {x}x"), verdict(ratio, ratio <= x)),
                Bar::None | Bar::AbsAtMost(_) => (String::new(), String::new()),
            };
            out.push_str(&format!(" {bar} | {verdict} |"));
        }
        out.push('\n');
    }
    any.then_some(out)
}

/// `rtsd import` against rtsd's own telnet put of the same data set in the same session, as Markdown; `None`
/// when no import was measured. The bar is issue 4's: an import at least 5x the telnet rate.
pub fn import_table(samples: &Samples) -> Option<String> {
    const ROWS: &[(&str, &str, &str, Option<f64>)] = &[
        (
            "points/s, A (wall: import start to exit / telnet first byte to last point stored)",
            "a_import.rate",
            "a_telnet.rate",
            Some(5.0),
        ),
        ("points per CPU-second (import process / telnet server)", "a_import.per_cpu", "a_telnet.per_cpu", None),
        (
            "points per CPU-second until settled (import process / telnet server to a settled store)",
            "a_import.per_cpu",
            "a_telnet.per_cpu_settled",
            None,
        ),
        ("peak RSS (MiB)", "a_import.rss", "a_telnet.rss", None),
        ("disk bytes/point (after the import / after flush)", "a_import.disk", "a_telnet.disk", None),
    ];
    if samples.get("a_import.rate", Kind::Rtsd).is_empty() {
        return None;
    }
    let mut out = String::from(
        "| rtsd figure | `rtsd import` | telnet put | import/telnet | bar | verdict |\n|---|---|---|---|---|---|\n",
    );
    for (label, import, telnet, bar) in ROWS {
        let (i, t) = (samples.get(import, Kind::Rtsd), samples.get(telnet, Kind::Rtsd));
        let ratio = if i.is_empty() || t.is_empty() { f64::NAN } else { median(i) / median(t) };
        let (bar, verdict) = match bar {
            Some(x) => (format!(">= {x}x"), verdict(ratio, ratio >= *x)),
            None => (String::new(), String::new()),
        };
        let ratio = if ratio.is_finite() { format!("{ratio:.2}x") } else { "-".into() };
        out.push_str(&format!("| {label} | {} | {} | {ratio} | {bar} | {verdict} |\n", cell(i), cell(t)));
    }
    Some(out)
}

fn verdict(x: f64, ok: bool) -> String {
    if !x.is_finite() {
        String::new()
    } else if ok {
        "meets".into()
    } else {
        "misses".into()
    }
}

/// Facts about the machine and the software measured.
pub struct MachineFacts {
    pub lines: Vec<String>,
}

fn cmd_out(cmd: &str, args: &[&str]) -> Option<String> {
    let o = Command::new(cmd).args(args).output().ok()?;
    o.status.success().then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

impl MachineFacts {
    pub fn gather(
        rtsd: &Path,
        rtsd_built: Option<SystemTime>,
        vm: &Path,
        load_before: String,
        load_after: String,
        elapsed: Duration,
    ) -> MachineFacts {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let model = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name"))
            .map(|m| m.trim_start_matches([' ', '\t', ':']).to_string());
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let mem_gib = meminfo
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
            .map(|kib| kib / 1024.0 / 1024.0);
        let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim().to_string();
        let debian = std::fs::read_to_string("/etc/debian_version").unwrap_or_default().trim().to_string();
        let root = crate::runner::workspace_root();
        let root_s = root.to_string_lossy().to_string();
        let commit = cmd_out("git", &["-C", &root_s, "rev-parse", "--short", "HEAD"]).unwrap_or("?".into());
        let dirty = cmd_out(
            "git",
            &["-C", &root_s, "status", "--porcelain", "--", "src", "protocol", "Cargo.toml", "Cargo.lock"],
        )
        .map(|s| s.lines().count())
        .unwrap_or(0);
        let built = rtsd_built.map(date_time).unwrap_or("?".into());
        let vm_version = cmd_out("dpkg-query", &["-W", "-f", "${Version}", "victoria-metrics"]).unwrap_or("?".into());
        let mut lines = vec![
            format!(
                "Machine: {cpus} CPUs ({}), {:.1} GiB RAM, Linux {kernel}, Debian {debian}; load average before {load_before}, after {load_after}; took {:.0} s.",
                model.unwrap_or("?".into()),
                mem_gib.unwrap_or(0.0),
                elapsed.as_secs_f64()
            ),
            format!(
                "rtsd: commit {commit}{}, binary {} built {built}. VictoriaMetrics: Debian package {vm_version} ({}).",
                if dirty > 0 { format!(" + uncommitted changes in {dirty} file(s) of src/ protocol/") } else { String::new() },
                rtsd.display(),
                vm.display()
            ),
        ];
        lines.retain(|l| !l.is_empty());
        MachineFacts { lines }
    }
}

/// `YYYY-MM-DD HH:MM UTC`.
pub fn date_time(t: SystemTime) -> String {
    let s = t.duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
    let (y, m, d) = civil(s);
    let sod = s.rem_euclid(86_400);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02} UTC", sod / 3600, sod % 3600 / 60)
}

/// One dated entry for `RESULTS.md`.
pub fn results_entry(opts: &Options, facts: &MachineFacts, table: &str, s: &Session) -> String {
    let mut e = String::new();
    e.push_str(&format!(
        "\n## {} — scale {}, {} run(s) each, {} connections\n\n",
        date_time(SystemTime::now()),
        opts.scale,
        opts.runs,
        opts.conns
    ));
    e.push_str(&format!("Command: `{}`\n\n", opts.command));
    for l in &facts.lines {
        e.push_str(&format!("{l}\n"));
    }
    if let Some(n) = &opts.note {
        e.push_str(&format!("\n{n}\n"));
    }
    e.push('\n');
    for d in &s.sets {
        e.push_str(&format!("- {d}\n"));
    }
    for g in &s.generator {
        e.push_str(&format!("- {g}\n"));
    }
    e.push('\n');
    e.push_str(table);
    let failed: Vec<&Check> = s.checks.iter().filter(|c| !c.ok).collect();
    e.push_str(&format!("\nChecks: {} passed, {} failed.\n", s.checks.len() - failed.len(), failed.len()));
    for c in failed {
        e.push_str(&format!("- FAILED {}: {}\n", c.what, c.detail.replace('\n', " ")));
    }
    for n in &s.notes {
        e.push_str(&format!("- {n}\n"));
    }
    e
}

/// Appends `entry` to `path` (creating it with a header if needed).
pub fn append(path: &Path, entry: &str) -> Result<(), String> {
    let new = !path.exists();
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if new {
        f.write_all(
            b"# rtsd benchmark results\n\nAppended by `rtsd-bench run`; see the README's Benchmarks section.\n",
        )
        .map_err(|e| e.to_string())?;
    }
    f.write_all(entry.as_bytes()).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_numbers() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
        assert_eq!(si(1_523_000.0), "1.52 M");
        assert_eq!(si(158_300.0), "158 k");
        assert_eq!(si(83.14), "83.1");
        assert_eq!(si(1.644), "1.64");
    }

    #[test]
    fn table_has_ratio_and_verdict() {
        let mut s = Samples::default();
        for v in [2.0e6, 2.2e6, 1.9e6] {
            s.add("a_telnet.rate", Kind::Rtsd, v);
        }
        for v in [1.0e6, 1.1e6, 0.9e6] {
            s.add("a_telnet.rate", Kind::Vm, v);
        }
        s.add("b.q1", Kind::Rtsd, 60.0);
        s.add("b.q1", Kind::Vm, 80.0);
        let t = table(&s, &[Kind::Rtsd, Kind::Vm]);
        assert!(t.contains("| telnet put ingest, A (points/s) | 2.00 M (1.90 M–2.20 M) | 1.00 M (900 k–1.10 M) | 2.00x | >= 1.5x | meets |"), "{t}");
        assert!(t.contains("| q1 latency, B warm (ms) | 60.0 | 80.0 | 0.75x | <= 0.5x | misses |"), "{t}");
        assert!(!t.contains("HTTP"));
    }

    #[test]
    fn pair_tables_carry_issue_21s_bar_for_rtsd_on_hbase_against_opentsdb() {
        let mut s = Samples::default();
        assert_eq!(pair_table(&s, Kind::RtsdHbase, Kind::OpenTsdb), None);
        s.add("a_telnet.rate", Kind::RtsdHbase, 60_000.0);
        s.add("a_telnet.rate", Kind::OpenTsdb, 10_000.0);
        s.add("a_http.rate", Kind::RtsdHbase, 40_000.0);
        s.add("a_http.rate", Kind::OpenTsdb, 10_000.0);
        s.add("b.q1", Kind::RtsdHbase, 100.0);
        s.add("b.q1", Kind::OpenTsdb, 1000.0);
        s.add("a_telnet.per_cpu_own", Kind::RtsdHbase, 500_000.0);
        s.add("a_telnet.per_cpu_own", Kind::OpenTsdb, 50_000.0);
        let t = pair_table(&s, Kind::RtsdHbase, Kind::OpenTsdb).unwrap();
        assert!(t.starts_with("| figure | rtsd-on-HBase | OpenTSDB | rtsd-on-HBase/OpenTSDB | bar | verdict |"), "{t}");
        assert!(t.contains("| telnet put ingest, A (points/s) | 60 k | 10 k | 6.00x | >= 5x | meets |"), "{t}");
        assert!(t.contains("| HTTP /api/put ingest, A (points/s) | 40 k | 10 k | 4.00x | >= 5x | misses |"), "{t}");
        assert!(t.contains("| q1 latency, B warm (ms) | 100 | 1000 | 0.10x | <= 0.5x | meets |"), "{t}");
        assert!(
            t.contains("| points per CPU-second of the TSD process alone, A telnet | 500 k | 50 k | 10.00x |  |  |"),
            "{t}"
        );
        // rtsd-on-HBase against rtsd on RocksDB: no bar, and the RocksDB column says so.
        s.add("a_telnet.rate", Kind::Rtsd, 120_000.0);
        s.add("a_telnet.per_cpu_own", Kind::Rtsd, 1_000_000.0);
        let t = pair_table(&s, Kind::RtsdHbase, Kind::Rtsd).unwrap();
        assert!(t.starts_with("| figure | rtsd-on-HBase | rtsd-on-RocksDB | rtsd-on-HBase/rtsd-on-RocksDB |\n"), "{t}");
        assert!(t.contains("| telnet put ingest, A (points/s) | 60 k | 120 k | 0.50x |\n"), "{t}");
        assert!(t.contains("TSD process alone, A telnet | 500 k | 1.00 M | 0.50x |"), "{t}");
        // rtsd on RocksDB against OpenTSDB: as before (no bar columns).
        let t = pair_table(&s, Kind::Rtsd, Kind::OpenTsdb).unwrap();
        assert!(t.contains("| telnet put ingest, A (points/s) | 120 k | 10 k | 12.00x |\n"), "{t}");
        // The rtsd/VM table leaves the own-process rows out (there they equal the whole).
        s.add("a_telnet.per_cpu_own", Kind::Vm, 1.0);
        assert!(!table(&s, &[Kind::Rtsd, Kind::Vm]).contains("alone"));
    }

    #[test]
    fn import_table_compares_with_telnet_of_the_same_session() {
        let mut s = Samples::default();
        assert_eq!(import_table(&s), None);
        for v in [10.0e6, 12.0e6, 11.0e6] {
            s.add("a_import.rate", Kind::Rtsd, v);
        }
        s.add("a_import.rss", Kind::Rtsd, 200.0);
        for v in [2.0e6, 2.2e6] {
            s.add("a_telnet.rate", Kind::Rtsd, v);
        }
        // VictoriaMetrics' samples play no part.
        s.add("a_telnet.rate", Kind::Vm, 1.0e6);
        let t = import_table(&s).unwrap();
        assert!(t.contains("| 11.00 M (10.00 M–12.00 M) | 2.10 M (2.00 M–2.20 M) | 5.24x | >= 5x | meets |"), "{t}");
        assert!(t.contains("| peak RSS (MiB) | 200 | - | - |  |  |"), "{t}");
        // Per CPU-second, against telnet's CPU until its store settled (what the burst left owed counted too).
        s.add("a_import.per_cpu", Kind::Rtsd, 7.0e6);
        s.add("a_telnet.per_cpu_settled", Kind::Rtsd, 1.25e6);
        let t = import_table(&s).unwrap();
        assert!(
            t.contains("| points per CPU-second until settled (import process / telnet server to a settled store) | 7.00 M | 1.25 M | 5.60x |  |  |"),
            "{t}"
        );
        s.add("a_import.rate", Kind::Rtsd, 1.0e6);
        s.add("a_import.rate", Kind::Rtsd, 1.0e6);
        assert!(import_table(&s).unwrap().contains("| 4.76x | >= 5x | misses |"));
    }
}
