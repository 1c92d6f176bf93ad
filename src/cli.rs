//! The `rtsd` command line: `serve` runs the daemon; `scan`, `import`, `query`, `uid`, `mkmetric` and `fsck` are
//! OpenTSDB's `tsdb` tools on a data directory (see [`crate::tools`]).
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use rtsd_protocol::point::UidKind;

use crate::config::{Config, Flags};
use crate::scan::ScanFormat;
use crate::tools;

#[derive(Parser)]
#[command(name = "rtsd", version, about = "A time-series daemon that speaks OpenTSDB 2.4's protocols")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the daemon: telnet-style put lines and HTTP on one port.
    Serve(Common),
    /// Print stored rows as `tsdb scan` does; `--import` gives the import format, `--delete` deletes them.
    Scan {
        #[command(flatten)]
        common: Common,
        /// Print in OpenTSDB's import format (`metric timestamp value tag=value ...`).
        #[arg(long)]
        import: bool,
        /// Delete every row printed (implies --import). Needs the data directory to itself.
        #[arg(long)]
        delete: bool,
        /// START [END] AGG [rate] [downsample N FUNC] METRIC [TAG=VALUE ...] [more queries]
        #[arg(required = true, num_args = 1.., allow_hyphen_values = true)]
        query: Vec<String>,
    },
    /// Import data points in OpenTSDB's text format (`metric timestamp value tag=value ...`; `.gz` read too,
    /// `-` is stdin). Through the running daemon when it holds the data directory.
    Import {
        #[command(flatten)]
        common: Common,
        /// Report and skip bad lines instead of stopping at the first one.
        #[arg(long)]
        skip_errors: bool,
        /// Create metrics that have no UID yet (tsd.core.auto_create_metrics=true for this run).
        #[arg(long)]
        auto_metric: bool,
        #[arg(required = true, num_args = 1.., value_name = "FILE")]
        files: Vec<String>,
    },
    /// Query and print data points as `tsdb query` does: `metric timestamp value {tags}`.
    Query {
        #[command(flatten)]
        common: Common,
        /// Write Gnuplot data files and script under this base path instead of printing.
        #[arg(long, value_name = "BASEPATH")]
        graph: Option<String>,
        /// START [END] AGG [rate [counter[,MAX[,RESET]]]] [downsample N FUNC] METRIC [TAG=VALUE ...] [...]
        #[arg(required = true, num_args = 1.., allow_hyphen_values = true)]
        query: Vec<String>,
    },
    /// UID maintenance as `tsdb uid`: grep [KIND] RE | assign KIND NAME... | rename KIND OLD NEW |
    /// delete KIND NAME | fsck [fix] [delete_unknown] | metasync | treesync | [KIND] NAME-or-ID.
    Uid {
        #[command(flatten)]
        common: Common,
        /// Ignore case when grepping.
        #[arg(short = 'i', long)]
        ignore_case: bool,
        /// Bytes of an id looked up by number (default: the kind's configured width).
        #[arg(long, value_name = "N")]
        idwidth: Option<usize>,
        #[arg(required = true, num_args = 1.., allow_hyphen_values = true, value_name = "ARGS")]
        args: Vec<String>,
    },
    /// Assign metric UIDs (`uid assign metrics NAME...`).
    Mkmetric {
        #[command(flatten)]
        common: Common,
        #[arg(required = true, num_args = 1.., value_name = "NAME")]
        names: Vec<String>,
    },
    /// Check the data rows for errors as `tsdb fsck` does, and with --fix repair them.
    Fsck {
        #[command(flatten)]
        common: Common,
        /// Check every row (instead of the rows of a query).
        #[arg(long)]
        full_scan: bool,
        /// Fix errors (refined by the flags below; rows with unrepaired errors are left as they are).
        #[arg(long)]
        fix: bool,
        /// Fix with every repair flag set.
        #[arg(long)]
        fix_all: bool,
        /// Accepted for compatibility: rewritten rows are always compacted.
        #[arg(long)]
        compact: bool,
        /// Keep one point of duplicates (the oldest, or the latest with --last-write-wins).
        #[arg(long)]
        resolve_duplicates: bool,
        /// Keep the last written of duplicates (default: tsd.storage.fix_duplicates).
        #[arg(long)]
        last_write_wins: bool,
        /// Delete rows whose metric or tag UIDs have no name.
        #[arg(long)]
        delete_orphans: bool,
        /// Delete columns that are not OpenTSDB's.
        #[arg(long)]
        delete_unknown_columns: bool,
        /// Delete data points with values that cannot be read.
        #[arg(long)]
        delete_bad_values: bool,
        /// Delete rows with invalid keys.
        #[arg(long)]
        delete_bad_rows: bool,
        /// Delete compacted columns that cannot be parsed.
        #[arg(long)]
        delete_bad_compacts: bool,
        /// Instead of checking rows: list series and UIDs unused for longer than every retention (see the
        /// README's Retention); with --fix, remove them and compact expired rows away.
        #[arg(long)]
        reclaim: bool,
        /// Accepted for compatibility; the scan is single-threaded.
        #[arg(long, value_name = "N")]
        threads: Option<usize>,
        /// [START [END] AGG METRIC [TAG=VALUE ...] ...]
        #[arg(num_args = 0.., allow_hyphen_values = true)]
        query: Vec<String>,
    },
}

#[derive(Args, Clone)]
struct Common {
    /// An OpenTSDB-style properties file (tsd.* and rtsd.* keys). Without it, the shipped rtsd.conf applies.
    #[arg(long)]
    config: Option<PathBuf>,
    /// tsd.network.port
    #[arg(long)]
    port: Option<u16>,
    /// tsd.network.bind
    #[arg(long)]
    bind: Option<String>,
    /// rtsd.data_dir (default ./rtsd-data)
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Set any property: --set tsd.core.auto_create_metrics=false (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// rtsd.chukwa.port: the Chukwa collector listener (default 8080; 0 turns it off)
    #[arg(long)]
    chukwa_port: Option<u16>,
}

impl Common {
    fn config(&self) -> Result<Config, String> {
        let mut set = Vec::new();
        for kv in &self.set {
            let (k, v) = kv.split_once('=').ok_or_else(|| format!("--set expects KEY=VALUE, got {kv:?}"))?;
            set.push((k.trim().to_string(), v.trim().to_string()));
        }
        let flags = Flags {
            config: self.config.clone(),
            port: self.port,
            bind: self.bind.clone(),
            data_dir: self.data_dir.clone(),
            set,
            chukwa_port: self.chukwa_port,
        };
        Config::load(&flags).map_err(|e| e.to_string())
    }
}

/// Parses the command line and runs it; the `rtsd` binary is this function.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    // The daemon logs at info; the tools print their own results and summaries, so only warnings are logged.
    let default_level = if matches!(cli.command, Command::Serve(_)) { "info" } else { "warn" };
    crate::logs::init(default_level);
    let result = match cli.command {
        Command::Serve(common) => serve(&common).map(|()| 0),
        Command::Scan { common, import, delete, query } => scan(&common, import, delete, &query),
        Command::Import { common, skip_errors, auto_metric, files } => {
            import(&common, skip_errors, auto_metric, &files)
        }
        Command::Query { common, graph, query } => query_cmd(&common, graph.as_deref(), &query),
        Command::Uid { common, ignore_case, idwidth, args } => uid(&common, ignore_case, idwidth, &args),
        Command::Mkmetric { common, names } => mkmetric(&common, &names),
        Command::Fsck {
            common,
            full_scan,
            fix,
            fix_all,
            compact: _,
            resolve_duplicates,
            last_write_wins,
            delete_orphans,
            delete_unknown_columns,
            delete_bad_values,
            delete_bad_rows,
            delete_bad_compacts,
            reclaim,
            threads: _,
            query,
        } => {
            let config = common.config();
            config.and_then(|config| {
                if reclaim {
                    return reclaim_expired(&config, fix || fix_all);
                }
                let lww = last_write_wins || config.fix_duplicates;
                let options = if fix_all {
                    tools::fsck::FsckOptions::fix_all(lww)
                } else {
                    tools::fsck::FsckOptions {
                        fix,
                        resolve_duplicates,
                        last_write_wins: lww,
                        delete_orphans,
                        delete_unknown_columns,
                        delete_bad_values,
                        delete_bad_rows,
                        delete_bad_compacts,
                    }
                };
                fsck(&config, full_scan, options, &query)
            })
        }
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("rtsd: {e}");
            ExitCode::FAILURE
        }
    }
}

fn serve(common: &Common) -> Result<(), String> {
    let config = common.config()?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(|e| e.to_string())?;
    runtime.block_on(crate::daemon::run(config)).map_err(|e| e.to_string())
}

const STOP_HINT: &str = "";

fn scan(common: &Common, import: bool, delete: bool, query: &[String]) -> Result<u8, String> {
    let config = common.config()?;
    let now = tools::now_ms();
    let q = crate::scan::parse_command_line(query, now)?;
    let store = if delete { tools::open_writable(&config, STOP_HINT) } else { tools::open_read_only(&config) }
        .map_err(|e| e.to_string())?;
    let format = if import || delete { ScanFormat::Import } else { ScanFormat::Raw };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let summary = crate::scan::scan(&store, &q, now, format, delete, &mut out).map_err(|e| e.to_string())?;
    std::io::Write::flush(&mut out).map_err(|e| e.to_string())?;
    if delete {
        eprintln!("deleted {} rows ({} data points)", summary.deleted_rows, summary.points);
    }
    Ok(0)
}

fn import(common: &Common, skip_errors: bool, auto_metric: bool, files: &[String]) -> Result<u8, String> {
    let mut config = common.config()?;
    if auto_metric {
        config.auto_create[0] = true;
    }
    tools::import::run(&config, files, tools::import::ImportOptions { skip_errors })
}

fn query_cmd(common: &Common, graph: Option<&str>, query: &[String]) -> Result<u8, String> {
    let config = common.config()?;
    let now = tools::now_ms();
    let q = crate::scan::parse_command_line(query, now)?;
    let store = tools::open_read_only(&config).map_err(|e| e.to_string())?;
    let results = tools::query::run_queries(&store, &q, now, config.query_limits)?;
    let groups: Vec<_> = results.into_iter().flatten().collect();
    if let Some(base) = graph {
        let n = tools::query::write_graph(base, &groups, &q.plot_params)
            .map_err(|e| format!("cannot write the Gnuplot files under {base}: {e}"))?;
        eprintln!("Wrote {n} for Gnuplot");
        return Ok(0);
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    tools::query::print_groups(&groups, &mut out).map_err(|e| e.to_string())?;
    std::io::Write::flush(&mut out).map_err(|e| e.to_string())?;
    Ok(0)
}

fn uid(common: &Common, ignore_case: bool, idwidth: Option<usize>, args: &[String]) -> Result<u8, String> {
    use tools::uid::parse_kind;
    let config = common.config()?;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut err = std::io::stderr();
    let usage = |what: &str| {
        format!("{what}: rtsd uid grep [KIND] RE | assign KIND NAME... | rename KIND OLD NEW | delete KIND NAME | fsck [fix] [delete_unknown] | metasync | treesync | [KIND] NAME-or-ID")
    };
    let n = args.len();
    match args[0].as_str() {
        "grep" => {
            if !(2..=3).contains(&n) {
                return Err(usage("Wrong number of arguments"));
            }
            let kind = if n == 3 { Some(parse_kind(&args[1])?) } else { None };
            let store = tools::open_read_only(&config).map_err(|e| e.to_string())?;
            let found = tools::uid::grep(&store, kind, &args[n - 1], ignore_case, &mut out)?;
            Ok(if found { 0 } else { 1 })
        }
        "assign" => {
            if n < 3 {
                return Err(usage("Wrong number of arguments"));
            }
            let kind = parse_kind(&args[1])?;
            let store = tools::open_writable(&config, "; or use POST /api/uid/assign").map_err(|e| e.to_string())?;
            let ok = tools::uid::assign(&store, kind, &args[2..], &config.rules, &mut out, &mut err)?;
            store.flush().map_err(|e| e.to_string())?;
            Ok(if ok { 0 } else { 1 })
        }
        "rename" => {
            if n != 4 {
                return Err(usage("Wrong number of arguments"));
            }
            let kind = parse_kind(&args[1])?;
            let store = tools::open_writable(&config, "; or use POST /api/uid/rename").map_err(|e| e.to_string())?;
            match store.rename_uid(kind, &args[2], &args[3]) {
                Ok(_) => {
                    store.flush().map_err(|e| e.to_string())?;
                    std::io::Write::write_all(&mut out, format!("{} {} -> {}\n", args[1], args[2], args[3]).as_bytes())
                        .map_err(|e| e.to_string())?;
                    Ok(0)
                }
                Err(e) => {
                    eprintln!("{e}");
                    Ok(1)
                }
            }
        }
        "delete" => {
            if n != 3 {
                return Err(usage("Wrong number of arguments"));
            }
            let kind = parse_kind(&args[1])?;
            let store = tools::open_writable(&config, STOP_HINT).map_err(|e| e.to_string())?;
            match tools::uid::delete(&store, kind, &args[2]) {
                Ok(_) => {
                    eprintln!("UID {} {} deleted.", args[1], args[2]);
                    Ok(0)
                }
                Err(e) => {
                    eprintln!("{e}");
                    Ok(1)
                }
            }
        }
        "fsck" => {
            let fix = args[1..].iter().any(|a| a == "fix");
            let delete_unknown = args[1..].iter().any(|a| a == "delete_unknown");
            let store = if fix { tools::open_writable(&config, STOP_HINT) } else { tools::open_read_only(&config) }
                .map_err(|e| e.to_string())?;
            let errors = tools::uid::fsck(&store, fix, delete_unknown, &mut out)?;
            Ok(if errors == 0 { 0 } else { 1 })
        }
        "metasync" => {
            let store = tools::open_writable(&config, STOP_HINT).map_err(|e| e.to_string())?;
            let bar = tools::progress(store.estimated_rows(), "rows");
            let (rows, series) = store.rebuild_series_index(|n| bar.set_position(n)).map_err(|e| e.to_string())?;
            store.flush().map_err(|e| e.to_string())?;
            bar.finish_and_clear();
            eprintln!("Completed meta data synchronization: {rows} rows scanned, {series} series indexed");
            Ok(0)
        }
        "treesync" | "treepurge" => {
            eprintln!("Tree processing is disabled (rtsd has no trees)");
            Ok(0)
        }
        "metapurge" => {
            Err("rtsd keeps no UID or TS meta rows to purge; its series index is rebuilt by `rtsd uid metasync`".into())
        }
        _ => {
            if n > 2 {
                return Err(usage("Wrong number of arguments"));
            }
            let kind = if n == 2 { Some(parse_kind(&args[0])?) } else { None };
            let store = tools::open_read_only(&config).map_err(|e| e.to_string())?;
            let found = tools::uid::lookup(&store, kind, &args[n - 1], idwidth, &mut out, &mut err)?;
            Ok(if found { 0 } else { 1 })
        }
    }
}

fn mkmetric(common: &Common, names: &[String]) -> Result<u8, String> {
    let config = common.config()?;
    let store = tools::open_writable(&config, "; or use POST /api/uid/assign").map_err(|e| e.to_string())?;
    let stdout = std::io::stdout();
    let ok =
        tools::uid::assign(&store, UidKind::Metric, names, &config.rules, &mut stdout.lock(), &mut std::io::stderr())?;
    store.flush().map_err(|e| e.to_string())?;
    Ok(if ok { 0 } else { 1 })
}

/// `fsck --reclaim [--fix]`: prints each UID unused past every retention (`kind name: [uid]`) and a summary.
fn reclaim_expired(config: &Config, fix: bool) -> Result<u8, String> {
    let store = if fix { tools::open_writable(config, STOP_HINT) } else { tools::open_read_only(config) }
        .map_err(|e| e.to_string())?;
    let r = store.reclaim_expired(fix).map_err(|e| e.to_string())?;
    if r.kept_forever {
        println!("Some table keeps its rows forever (a retention of 0): nothing is unused past every retention");
        return Ok(0);
    }
    for (kind, name, uid) in &r.uids {
        println!("{} {name}: {}", kind.as_str(), rtsd_protocol::javafmt::byte_array(uid));
    }
    let verb = if fix { "Reclaimed" } else { "Reclaimable" };
    println!("{verb}: {} series, {} UIDs; expired rows compacted away: {}", r.series, r.uids.len(), r.rows_removed);
    if fix {
        store.flush().map_err(|e| e.to_string())?;
    }
    Ok(0)
}

fn fsck(config: &Config, full_scan: bool, options: tools::fsck::FsckOptions, query: &[String]) -> Result<u8, String> {
    let now = tools::now_ms();
    let q = if query.is_empty() {
        if !full_scan {
            return Err("Must supply a query or use the '--full-scan' flag".into());
        }
        None
    } else {
        Some(crate::scan::parse_command_line(query, now)?)
    };
    let store = if options.fix { tools::open_writable(config, STOP_HINT) } else { tools::open_read_only(config) }
        .map_err(|e| e.to_string())?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let counts = tools::fsck::run(&store, q.as_ref(), now, options, &mut out)?;
    std::io::Write::write_all(&mut out, counts.report().as_bytes()).map_err(|e| e.to_string())?;
    std::io::Write::flush(&mut out).map_err(|e| e.to_string())?;
    if options.fix {
        store.flush().map_err(|e| e.to_string())?;
    }
    Ok(if counts.total_errors() == 0 { 0 } else { 1 })
}
