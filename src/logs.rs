//! The daemon's logging: `tracing` to stderr, plus a bounded ring of the most recent records that `/logs`
//! serves (OpenTSDB keeps logback's `CyclicBufferAppender` of 1024 events for the same page, spec: query §6.18),
//! and run-time level changes (`/logs?level=debug&logger=...`, as OpenTSDB's `LogsRpc`).
//!
//! The ring holds what passed the level filter, like an appender of the root logger, and costs one short lock
//! per record logged: nothing on the per-point path logs.
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write as _;
use std::sync::{Mutex, OnceLock};

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::filter::EnvFilter;
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{reload, Registry};

/// One cause of trouble logged at most once per interval: the first occurrence at once, later ones folded into a
/// count that the next logged line carries. A failing disk or a hostile client can produce a failure per point
/// or per connection; a line each would flood the log (issue 23: 683 k lines in 30 s) and bury the cause.
pub struct Throttle {
    every: std::time::Duration,
    state: Mutex<(Option<std::time::Instant>, u64)>,
}

impl Throttle {
    pub const fn new(every: std::time::Duration) -> Throttle {
        Throttle { every, state: Mutex::new((None, 0)) }
    }

    /// `Some(n)` when this occurrence is to be logged, `n` being the occurrences left unlogged since the last
    /// one; `None` when it is only counted.
    pub fn allow(&self) -> Option<u64> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let now = std::time::Instant::now();
        match state.0 {
            Some(last) if now.duration_since(last) < self.every => {
                state.1 += 1;
                None
            }
            _ => {
                let suppressed = std::mem::take(&mut state.1);
                state.0 = Some(now);
                Some(suppressed)
            }
        }
    }
}

/// Records kept for `/logs` (logback's `CyclicBufferAppender` in OpenTSDB's shipped logback.xml keeps 1024).
pub const CAPACITY: usize = 1024;

/// One log record as `/logs` prints it.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub time_ms: i64,
    pub level: Level,
    pub thread: String,
    pub logger: String,
    pub message: String,
}

impl Record {
    /// OpenTSDB's line: `seconds TAB LEVEL TAB thread TAB logger TAB message` (the UI's log tab splits on tabs).
    pub fn line(&self) -> String {
        format!("{}\t{}\t{}\t{}\t{}", self.time_ms / 1000, self.level, self.thread, self.logger, self.message)
    }
}

/// The ring and the level state, once logging is installed.
struct Logs {
    ring: Mutex<VecDeque<Record>>,
    /// Every logger (tracing target) a log statement of the process has named so far.
    loggers: Mutex<BTreeSet<String>>,
    levels: Mutex<Levels>,
    handle: reload::Handle<EnvFilter, Registry>,
}

/// The filter as directives: the root's (initially `RUST_LOG` or the command's default) and per-logger levels.
struct Levels {
    root: String,
    loggers: BTreeMap<String, String>,
}

impl Levels {
    fn directives(&self) -> String {
        let mut d = self.root.clone();
        for (logger, level) in &self.loggers {
            let _ = write!(d, ",{logger}={level}");
        }
        d
    }
}

static LOGS: OnceLock<Logs> = OnceLock::new();

/// Installs logging for the process: records at `default_level` and above (unless `RUST_LOG` says otherwise)
/// go to stderr and into the ring.
pub fn init(default_level: &str) {
    let root = std::env::var("RUST_LOG").ok().filter(|d| EnvFilter::try_new(d).is_ok());
    let root = root.unwrap_or_else(|| default_level.to_string());
    let (filter, handle) = reload::Layer::new(EnvFilter::new(&root));
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    let logs = Logs {
        ring: Mutex::new(VecDeque::with_capacity(CAPACITY)),
        loggers: Mutex::new(BTreeSet::new()),
        levels: Mutex::new(Levels { root, loggers: BTreeMap::new() }),
        handle,
    };
    if LOGS.set(logs).is_ok() {
        let _ = tracing_subscriber::registry().with(filter).with(fmt).with(RingLayer).try_init();
    }
}

/// The recent records, newest first (as OpenTSDB lists them). Empty when logging was not installed.
pub fn recent() -> Vec<Record> {
    match LOGS.get() {
        Some(logs) => logs.ring.lock().map(|r| r.iter().rev().cloned().collect()).unwrap_or_default(),
        None => Vec::new(),
    }
}

/// Sets the level of one logger (a tracing target and everything below it) or, without one or with `ROOT`,
/// of all of them, as `/logs?level=LEVEL[&logger=NAME]` does in OpenTSDB. Levels are logback's names
/// (`ALL`, `TRACE`, `DEBUG`, `INFO`, `WARN`, `ERROR`, `OFF`, any case). Returns OpenTSDB's reply line, or its
/// error text.
pub fn set_level(level: &str, logger: Option<&str>) -> Result<String, String> {
    let (name, directive) = match level.to_ascii_uppercase().as_str() {
        "ALL" => ("ALL", "trace"),
        "TRACE" => ("TRACE", "trace"),
        "DEBUG" => ("DEBUG", "debug"),
        "INFO" => ("INFO", "info"),
        "WARN" => ("WARN", "warn"),
        "ERROR" => ("ERROR", "error"),
        "OFF" => ("OFF", "off"),
        _ => return Err(format!("Invalid level: {level}")),
    };
    let Some(logs) = LOGS.get() else { return Err("Logging is not set up in this process".to_string()) };
    let known = logs.loggers.lock().map(|l| l.clone()).unwrap_or_default();
    let logger = logger.filter(|l| !l.eq_ignore_ascii_case("ROOT"));
    let mut levels = logs.levels.lock().map_err(|_| "log levels unavailable".to_string())?;
    let count = match logger {
        None => {
            // The root's level replaces every logger's, as OpenTSDB sets it on each logger of the context.
            levels.root = directive.to_string();
            levels.loggers.clear();
            known.len().max(1)
        }
        Some(l) => {
            // A logger exists once something logged under it or under a name below it (logback creates the
            // parents of every logger it hands out).
            let below = format!("{l}::");
            if !known.iter().any(|k| k == l || k.starts_with(&below))
                || EnvFilter::try_new(format!("{l}=info")).is_err()
            {
                return Err(format!("Invalid logger: {l}"));
            }
            levels.loggers.insert(l.to_string(), directive.to_string());
            1
        }
    };
    let filter = EnvFilter::try_new(levels.directives()).map_err(|e| e.to_string())?;
    logs.handle.reload(filter).map_err(|e| e.to_string())?;
    Ok(format!("Set the log level to {name} on {count} logger{}.\n", if count > 1 { "s" } else { "" }))
}

/// Copies each record that passed the filter into the ring, and notes every logger that exists.
struct RingLayer;

impl<S: Subscriber> Layer<S> for RingLayer {
    fn register_callsite(&self, metadata: &'static Metadata<'static>) -> tracing::subscriber::Interest {
        if let Some(logs) = LOGS.get() {
            if let Ok(mut loggers) = logs.loggers.lock() {
                loggers.insert(metadata.target().to_string());
            }
        }
        tracing::subscriber::Interest::always()
    }

    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let Some(logs) = LOGS.get() else { return };
        let mut message = MessageVisitor(String::new());
        event.record(&mut message);
        let thread = std::thread::current();
        let record = Record {
            time_ms: crate::timefmt::now_ms(),
            level: *event.metadata().level(),
            thread: thread.name().map(str::to_string).unwrap_or_else(|| format!("{:?}", thread.id())),
            logger: event.metadata().target().to_string(),
            message: message.0,
        };
        if let Ok(mut ring) = logs.ring.lock() {
            if ring.len() == CAPACITY {
                ring.pop_front();
            }
            ring.push_back(record);
        }
    }
}

/// The message first, then the other fields as ` name=value`, as the stderr format writes them.
struct MessageVisitor(String);

impl Visit for MessageVisitor {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let rest = std::mem::take(&mut self.0);
            let _ = write!(self.0, "{value:?}{rest}");
        } else {
            let _ = write!(self.0, " {}={value:?}", field.name());
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.0.insert_str(0, value);
        } else {
            let _ = write!(self.0, " {}={value}", field.name());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Throttle;

    #[test]
    fn a_throttle_logs_the_first_occurrence_then_counts_until_its_interval_passes() {
        let t = Throttle::new(std::time::Duration::from_millis(200));
        assert_eq!(t.allow(), Some(0));
        assert_eq!((t.allow(), t.allow(), t.allow()), (None, None, None));
        std::thread::sleep(std::time::Duration::from_millis(250));
        // The next logged line carries the three left unlogged.
        assert_eq!(t.allow(), Some(3));
        assert_eq!(t.allow(), None);
    }
}
