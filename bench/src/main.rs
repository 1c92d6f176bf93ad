//! `rtsd-bench`: rtsd against VictoriaMetrics on loopback, or the load generator against a discard sink.

use rtsd_bench::runner::{self, Options, Scenario};
use rtsd_bench::server::{self, Kind};
use std::path::PathBuf;
use std::process::ExitCode;

const HELP: &str = "\
rtsd-bench: rtsd (on RocksDB or HBase), VictoriaMetrics and OpenTSDB 2.4.1 side by side (shared/spec/performance.md)

USAGE:
  rtsd-bench run  [OPTIONS]   start each server per measurement, ingest, measure, check; print the table and
                               append it to bench/RESULTS.md
  rtsd-bench sink [OPTIONS]   the load generator alone, into a local discard sink
  rtsd-bench render a|b [--scale S]   print a data set's telnet lines (to look at them)
  rtsd-bench rollups [--days D --hosts H --step S --conns K --repeats N --rtsd PATH --no-record --keep --note T]
                               D days (30) of H hosts (1000) every S seconds (60) into rtsd with rollups on, then
                               the H-host `1h-avg` query from rollups vs raw data (ROLLUP_RAW) on that server
  rtsd-bench soak [--minutes M --series S --conns K --servers LIST --set K=V ... --no-record --note T]
                               M minutes (10) of telnet ingest of S live series (20000) with 1% replaced by new
                               series every round, per server in turn; RSS per minute (memory stays bounded?)

OPTIONS:
  --scale S          fraction of each data set's rounds (A: 100 rounds, B: 8640); default 1 (the spec's sizes)
  --hours-back H     data sets end H hours earlier (2: A lies in a closed hour, whose rows rtsd packs)
  --hosts N          hosts instead of 1000 (development only)
  --runs N           runs per server, interleaved (default 3)
  --conns K          connections (default 4)
  --per-request N    points per /api/put request (default 1000)
  --only LIST        comma-separated scenarios: a-telnet,a-http,b (default), a-import (`rtsd import` of A's
                     lines into a stopped directory; with a-telnet, the import/telnet ratio: issue 4's bar)
  --servers LIST     rtsd,vm,opentsdb,rtsd-hbase (default rtsd,vm); opentsdb is OpenTSDB 2.4.1 on a fresh HBase
                     test bed (scripts/hbase-cluster + scripts/opentsdb-ref: Java 17 and Maven) per measurement;
                     rtsd-hbase is the rtsd binary with rtsd.storage.engine=hbase on a fresh test bed of its own
                     per measurement. On a test bed a first burst of A's shape under other names warms the JVMs
                     (its rate: the 'first burst' rows), then the measurement starts once the cluster is idle.
                     With both on HBase the table has issue 21's bar (>= 5x OpenTSDB's ingest, <= 0.5x its q1);
                     with rtsd and rtsd-hbase, what the move to HBase costs on one box
  --rtsd PATH        the rtsd binary (default <workspace>/target/release/rtsd)
  --vm PATH          the victoria-metrics binary (default: from PATH)
  --scratch DIR      scratch directory (default $TMPDIR/rtsd-bench-<pid>; removed at the end)
  --keep             keep the scratch directory
  --results FILE     where to append (default <workspace>/bench/RESULTS.md)
  --no-record        do not append to the results file
  --note TEXT        a sentence to record with the results (e.g. what else ran on the machine)
  --min-rate R       give a measurement up below R points/s (default 20000)
  --q-repeats N      timed runs of q1, q2 and q3 after one warm-up (default 5)
  --probes N         visibility probes after one warm-up probe (default 5)
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    match real_main(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rtsd-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

fn real_main(args: &[String]) -> Result<(), String> {
    let root = runner::workspace_root();
    let mut opts = Options {
        scale: 1.0,
        hosts: None,
        runs: 3,
        conns: 4,
        per_request: 1000,
        scenarios: vec![Scenario::ATelnet, Scenario::AHttp, Scenario::B],
        servers: vec![Kind::Rtsd, Kind::Vm],
        rtsd: root.join("target/release/rtsd"),
        vm: server::which("victoria-metrics").unwrap_or_else(|| PathBuf::from("/usr/bin/victoria-metrics")),
        scripts: root.join("scripts"),
        scratch: runner::default_scratch(),
        keep: false,
        results: Some(root.join("bench/RESULTS.md")),
        min_rate: 20_000.0,
        q_repeats: 5,
        probes: 5,
        command: String::new(),
        note: None,
        hours_back: 0,
    };
    let Some(cmd) = args.get(1) else {
        print!("{HELP}");
        return Ok(());
    };
    if cmd == "rollups" {
        return rtsd_bench::rollups::cli(args, &root);
    }
    if cmd == "soak" {
        return rtsd_bench::soak::cli(args, &root);
    }
    let mut render_set = None;
    let mut no_record = false;
    let mut i = 2;
    let value = |i: usize| args.get(i + 1).cloned().ok_or_else(|| format!("{} needs a value", args[i]));
    let num = |i: usize| -> Result<f64, String> {
        let v = value(i)?;
        v.parse::<f64>()
            .ok()
            .filter(|x| x.is_finite() && *x > 0.0)
            .ok_or_else(|| format!("{}: bad number {v:?}", args[i]))
    };
    while i < args.len() {
        let mut used = 2;
        match args[i].as_str() {
            "--scale" => opts.scale = num(i)?,
            "--hours-back" => opts.hours_back = num(i)? as i64,
            "--hosts" => opts.hosts = Some(num(i)? as u32),
            "--runs" => opts.runs = num(i)? as usize,
            "--conns" => opts.conns = num(i)? as usize,
            "--per-request" => opts.per_request = num(i)? as usize,
            "--min-rate" => opts.min_rate = num(i)?,
            "--q-repeats" => opts.q_repeats = num(i)? as usize,
            "--probes" => opts.probes = num(i)? as usize,
            "--only" => {
                opts.scenarios = value(i)?
                    .split(',')
                    .map(|s| Scenario::parse(s.trim()).ok_or_else(|| format!("unknown scenario {s:?}")))
                    .collect::<Result<_, _>>()?
            }
            "--servers" => opts.servers = server::parse_servers(&value(i)?)?,
            "--rtsd" => opts.rtsd = PathBuf::from(value(i)?),
            "--vm" => opts.vm = PathBuf::from(value(i)?),
            "--scratch" => opts.scratch = PathBuf::from(value(i)?),
            "--results" => opts.results = Some(PathBuf::from(value(i)?)),
            "--note" => opts.note = Some(value(i)?),
            "--keep" => {
                opts.keep = true;
                used = 1
            }
            "--no-record" => {
                no_record = true;
                used = 1
            }
            "-h" | "--help" => {
                print!("{HELP}");
                return Ok(());
            }
            "a" | "b" if cmd == "render" && render_set.is_none() => {
                render_set = Some(args[i].clone());
                used = 1
            }
            o => return Err(format!("unknown argument {o:?} (see --help)")),
        }
        i += used;
    }
    // Whatever the order: `--no-record --results F` must not append to F.
    if no_record {
        opts.results = None;
    }
    if opts.conns == 0 || opts.runs == 0 || opts.per_request == 0 {
        return Err("--conns, --runs and --per-request must be at least 1".into());
    }
    opts.command = std::iter::once("rtsd-bench".to_string())
        .chain(args[1..].iter().map(|a| shell_quote(a)))
        .collect::<Vec<_>>()
        .join(" ");
    match cmd.as_str() {
        "run" => runner::run(&opts),
        "sink" => runner::sink_only(&opts),
        "render" => {
            use std::io::Write;
            let last = rtsd_bench::data::default_last_ts(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_secs() as i64)
                    .unwrap_or(0),
            );
            let set = match render_set.as_deref() {
                Some("a") => rtsd_bench::data::DataSet::a(opts.scale, opts.hosts, last),
                Some("b") => rtsd_bench::data::DataSet::b(opts.scale, opts.hosts, last),
                _ => return Err("render needs a or b".into()),
            };
            let mut out = std::io::stdout().lock();
            for buf in set.render_telnet(1) {
                // A closed pipe (`| head`) ends the output quietly.
                if out.write_all(&buf).is_err() {
                    break;
                }
            }
            Ok(())
        }
        "-h" | "--help" | "help" => {
            print!("{HELP}");
            Ok(())
        }
        o => Err(format!("unknown command {o:?} (see --help)")),
    }
}

/// `a` as a shell word: as it is when plain, else in single quotes.
fn shell_quote(a: &str) -> String {
    if !a.is_empty() && a.bytes().all(|b| b.is_ascii_alphanumeric() || b"_./,=:+-".contains(&b)) {
        a.to_string()
    } else {
        format!("'{}'", a.replace('\'', "'\\''"))
    }
}
