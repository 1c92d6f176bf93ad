//! `/api/stats` and its sub-routes, the old `/stats`, and `/logs` (spec: query §6.14, §6.18), answered from
//! rtsd's own facts: the process (threads, memory, uptime) stands where 2.4 shows its JVM, the query log lists
//! running and recently completed `/api/query` requests, and rtsd has no HBase region clients.
use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use hyper::{Method, StatusCode};
use rtsd_protocol::http_json::json_string;
use rtsd_protocol::javafmt::{double_to_string, hashmap_order};

use super::reply::Reply;
use super::request::ApiRequest;
use crate::server::Tsd;
use crate::timefmt::now_ms;

/// `/api/stats[/threads|jvm|query|region_clients]`: GET or POST (the method as sent); any other second segment
/// is the plain stats list, as in 2.4's `StatsRpc`.
pub fn api(sub: Option<&str>, req: &ApiRequest, tsd: &Tsd) -> Reply {
    if req.method != Method::GET && req.method != Method::POST {
        return Reply::method_not_allowed(&req.method);
    }
    match sub {
        Some("threads") => Reply::json(StatusCode::OK, threads_json()),
        Some("jvm") => Reply::json(StatusCode::OK, process_json(tsd)),
        Some("query") => Reply::json(StatusCode::OK, tsd.queries.to_json()),
        // 2.4 lists its asynchbase region clients; rtsd talks to no HBase, so it has none.
        Some("region_clients") => Reply::json(StatusCode::OK, "[]"),
        _ => Reply::json(StatusCode::OK, tsd.stats_json()),
    }
}

/// The old `/stats`: the telnet `stats` lines, or with `json` those lines as a JSON array of strings.
pub fn old_stats(req: &ApiRequest, tsd: &Tsd) -> Reply {
    let text = tsd.stats_text();
    if req.has("json") {
        let lines: Vec<String> = text.lines().map(json_string).collect();
        // 2.4 guesses the type from the body's first byte: `application/json` without a charset.
        return Reply::new(StatusCode::OK, "application/json", format!("[{}]", lines.join(",")));
    }
    Reply::text(StatusCode::OK, text)
}

/// `/logs`: rtsd's recent log records, newest first, one `seconds TAB LEVEL TAB thread TAB logger TAB message`
/// line each (a JSON array of those lines with `json`); `level=L[&logger=NAME]` changes a level at run time.
/// 2.4 types these replies by their first byte: `text/plain` or `application/json`, no charset.
pub fn logs(req: &ApiRequest) -> Reply {
    let lines: Vec<String> = crate::logs::recent().iter().map(crate::logs::Record::line).collect();
    if req.has("json") {
        let items: Vec<String> = lines.iter().map(|l| json_string(l)).collect();
        return Reply::new(StatusCode::OK, "application/json", format!("[{}]", items.join(",")));
    }
    if let Some(level) = req.param("level") {
        return match crate::logs::set_level(level, req.param("logger")) {
            Ok(reply) => Reply::text(StatusCode::OK, reply),
            Err(message) => Reply::page_error(StatusCode::BAD_REQUEST, &message, false),
        };
    }
    let mut body = String::with_capacity(lines.iter().map(|l| l.len() + 1).sum());
    for line in &lines {
        body.push_str(line);
        body.push('\n');
    }
    Reply::text(StatusCode::OK, body)
}

/// A JSON object whose keys come in the order a Java `HashMap` holding them iterates (2.4 builds these replies
/// from HashMaps); values are JSON already.
fn java_map(entries: &[(&str, String)]) -> String {
    let keys: Vec<&str> = entries.iter().map(|(k, _)| *k).collect();
    let body: Vec<String> =
        hashmap_order(&keys).into_iter().map(|i| format!("{}:{}", json_string(entries[i].0), entries[i].1)).collect();
    format!("{{{}}}", body.join(","))
}

/// `/api/stats/threads`: each thread of the process, from `/proc/self/task`. Keys as 2.4's: `threadID` (the
/// kernel's thread id), `name`, `state` (the kernel state as Java names it: running `RUNNABLE`, sleeping
/// `WAITING`, disk wait `BLOCKED`, stopped `WAITING`, zombie/dead `TERMINATED`), `priority` (the kernel's), and
/// `interrupted` (Rust threads have no interrupt flag: false). No `stack`: rtsd does not sample other threads'
/// stacks.
pub fn threads_json() -> String {
    let mut items = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else { return "[]".to_string() };
    let mut tids: Vec<u64> = dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect();
    tids.sort_unstable();
    for tid in tids {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")) else { continue };
        // `tid (comm) S ...`: the name may hold spaces and parentheses, so it ends at the last `)`.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else { continue };
        let name = &stat[open + 1..close];
        let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        let state = match fields.first().copied() {
            Some("R") => "RUNNABLE",
            Some("D") => "BLOCKED",
            Some("Z") | Some("X") | Some("x") => "TERMINATED",
            _ => "WAITING",
        };
        // Field 18 of stat (priority) is the 16th after the state.
        let priority = fields.get(15).and_then(|p| p.parse::<i64>().ok()).unwrap_or(0);
        items.push(java_map(&[
            ("threadID", tid.to_string()),
            ("name", json_string(name)),
            ("state", json_string(state)),
            ("interrupted", "false".to_string()),
            ("priority", priority.to_string()),
        ]));
    }
    format!("[{}]", items.join(","))
}

/// A `kB` line of `/proc/self/status` in bytes.
fn status_bytes(status: &str, key: &str) -> u64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// `/api/stats/jvm`: 2.4's map of JVM facts, filled with the process's: `runtime` (start and uptime in ms,
/// `vmName` rtsd and its version), `memory` (resident, peak resident and virtual bytes from `/proc/self/status`),
/// `pools` (RocksDB's memory: memtables, block caches, table readers), `gc` (empty: nothing is garbage
/// collected), `os` (`systemLoadAverage`, the 1-minute load).
pub fn process_json(tsd: &Tsd) -> String {
    let uptime = tsd.started.elapsed().as_millis() as i64;
    let version = env!("CARGO_PKG_VERSION");
    let runtime = java_map(&[
        ("startTime", (now_ms() - uptime).to_string()),
        ("uptime", uptime.to_string()),
        ("vmName", json_string("rtsd")),
        ("vmVendor", json_string("rtsd")),
        ("vmVersion", json_string(version)),
    ]);
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let memory = java_map(&[
        ("residentBytes", status_bytes(&status, "VmRSS").to_string()),
        ("peakResidentBytes", status_bytes(&status, "VmHWM").to_string()),
        ("virtualBytes", status_bytes(&status, "VmSize").to_string()),
    ]);
    let heap = crate::alloc::heap_stats().unwrap_or_default();
    let pools: Vec<(&str, String)> = tsd
        .store
        .memory_usage()
        .into_iter()
        .chain([
            ("heapAllocated", heap.allocated),
            ("heapActive", heap.active),
            ("heapMetadata", heap.metadata),
            ("heapResident", heap.resident),
        ])
        .map(|(name, bytes)| (name, java_map(&[("usage", bytes.to_string())])))
        .collect();
    let load = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next()?.parse::<f64>().ok())
        .unwrap_or(-1.0);
    let os = java_map(&[("systemLoadAverage", double_to_string(load))]);
    java_map(&[
        ("runtime", runtime),
        ("memory", memory),
        ("gc", "{}".to_string()),
        ("pools", java_map(&pools)),
        ("os", os),
    ])
}

/// Completed queries kept for `/api/stats/query` (2.4's `COMPLETED_QUERY_CACHE_SIZE`).
const COMPLETED_KEPT: usize = 256;

/// The `/api/query` requests running now and the last [`COMPLETED_KEPT`] finished ones, as 2.4's `QueryStats`
/// keeps them: a query sent again from the same address replaces its earlier entry and counts `executed`.
#[derive(Default)]
pub struct QueryLog {
    next: AtomicU64,
    running: Mutex<BTreeMap<u64, Running>>,
    completed: Mutex<VecDeque<Completed>>,
}

struct Running {
    query: String,
    remote: String,
    headers: String,
    start_ms: i64,
    started: Instant,
}

struct Completed {
    run: Running,
    completed_ms: i64,
    total_ms: f64,
    status: StatusCode,
    exception: Option<String>,
    sent: bool,
    executed: u64,
}

/// A running query's entry; [`RunningQuery::finish`] moves it to the completed list (dropping it unfinished
/// records a 500).
pub struct RunningQuery<'a> {
    log: &'a QueryLog,
    id: u64,
    done: bool,
}

impl QueryLog {
    /// Notes a query as running. `query` is its `TSQuery` JSON.
    pub fn start(&self, query: String, remote: Option<SocketAddr>, headers: &[(String, String)]) -> RunningQuery<'_> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        // 2.4 keeps the headers in a HashMap; one value per name (the last).
        let mut unique: Vec<(&str, String)> = Vec::new();
        for (k, v) in headers {
            match unique.iter_mut().find(|(uk, _)| *uk == k) {
                Some(entry) => entry.1 = json_string(v),
                None => unique.push((k.as_str(), json_string(v))),
            }
        }
        let run = Running {
            query,
            // Netty prints a remote address as `/ip:port`.
            remote: remote.map_or_else(|| "unknown".to_string(), |a| format!("/{a}")),
            headers: java_map(&unique),
            start_ms: now_ms(),
            started: Instant::now(),
        };
        if let Ok(mut running) = self.running.lock() {
            running.insert(id, run);
        }
        RunningQuery { log: self, id, done: false }
    }

    fn complete(&self, id: u64, status: StatusCode, exception: Option<String>, sent: bool) {
        let Some(run) = self.running.lock().ok().and_then(|mut r| r.remove(&id)) else { return };
        let Ok(mut completed) = self.completed.lock() else { return };
        let mut executed = 1;
        if let Some(i) = completed.iter().position(|c| c.run.query == run.query && c.run.remote == run.remote) {
            executed += completed.remove(i).map_or(0, |c| c.executed);
        }
        if completed.len() == COMPLETED_KEPT {
            completed.pop_front();
        }
        completed.push_back(Completed {
            completed_ms: now_ms(),
            total_ms: run.started.elapsed().as_secs_f64() * 1000.0,
            run,
            status,
            exception,
            sent,
            executed,
        });
    }

    /// `{"completed":[...],"running":[...]}` (a TreeMap in 2.4, so sorted keys).
    pub fn to_json(&self) -> String {
        let running: Vec<String> = match self.running.lock() {
            Ok(running) => running
                .values()
                .map(|r| {
                    java_map(&[
                        ("query", r.query.clone()),
                        ("remote", json_string(&r.remote)),
                        ("user", "null".to_string()),
                        ("headers", r.headers.clone()),
                        ("queryStart", r.start_ms.to_string()),
                        ("elapsed", double_to_string(r.started.elapsed().as_secs_f64() * 1000.0)),
                    ])
                })
                .collect(),
            Err(_) => Vec::new(),
        };
        let running_now = running.len();
        let completed: Vec<String> = match self.completed.lock() {
            Ok(completed) => completed
                .iter()
                .map(|c| {
                    // Jackson's order for QueryStats: getters named like fields first, then the rest.
                    let exception = c.exception.as_deref().unwrap_or("null");
                    format!(
                        r#"{{"query":{},"exception":{},"executed":{},"user":null,"requestHeaders":{},"numRunningQueries":{},"httpResponse":{{"code":{},"reasonPhrase":{}}},"queryStartTimestamp":{},"queryCompletedTimestamp":{},"sentToClient":{},"stats":{{"totalTime":{}}}}}"#,
                        c.run.query,
                        json_string(exception),
                        c.executed,
                        c.run.headers,
                        running_now,
                        c.status.as_u16(),
                        json_string(c.status.canonical_reason().unwrap_or("")),
                        c.run.start_ms,
                        c.completed_ms,
                        c.sent,
                        double_to_string(c.total_ms),
                    )
                })
                .collect(),
            Err(_) => Vec::new(),
        };
        format!(r#"{{"completed":[{}],"running":[{}]}}"#, completed.join(","), running.join(","))
    }
}

impl RunningQuery<'_> {
    /// Moves the query to the completed list with its reply's status (and error message). `sent` is false when
    /// the client went away before the answer.
    pub fn finish(mut self, status: StatusCode, exception: Option<String>, sent: bool) {
        self.done = true;
        self.log.complete(self.id, status, exception, sent);
    }
}

impl Drop for RunningQuery<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.log.complete(self.id, StatusCode::INTERNAL_SERVER_ERROR, Some("query failed".to_string()), false);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_log_keeps_running_and_completed_queries() {
        let log = QueryLog::default();
        let remote: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        let headers = vec![("Host".to_string(), "x".to_string())];
        let a = log.start(r#"{"start":"1"}"#.to_string(), Some(remote), &headers);
        let json: serde_json::Value = serde_json::from_str(&log.to_json()).unwrap();
        assert_eq!(json["running"][0]["remote"], "/127.0.0.1:5000");
        assert_eq!(json["running"][0]["headers"], serde_json::json!({"Host":"x"}));
        assert_eq!(json["completed"], serde_json::json!([]));
        a.finish(StatusCode::OK, None, true);
        // The same query again from the same address replaces the entry and counts it.
        log.start(r#"{"start":"1"}"#.to_string(), Some(remote), &headers).finish(
            StatusCode::BAD_REQUEST,
            Some("bad".into()),
            true,
        );
        // Dropped unfinished: recorded as a failure.
        drop(log.start(r#"{"start":"2"}"#.to_string(), Some(remote), &[]));
        let json: serde_json::Value = serde_json::from_str(&log.to_json()).unwrap();
        assert_eq!(json["running"], serde_json::json!([]));
        let done = json["completed"].as_array().unwrap();
        assert_eq!(done.len(), 2);
        assert_eq!(done[0]["executed"], 2);
        assert_eq!(done[0]["exception"], "bad");
        assert_eq!(done[0]["httpResponse"], serde_json::json!({"code":400,"reasonPhrase":"Bad Request"}));
        assert_eq!(done[1]["httpResponse"]["code"], 500);
        assert_eq!(done[1]["sentToClient"], false);
    }

    #[test]
    fn threads_are_read_from_proc() {
        let threads: serde_json::Value = serde_json::from_str(&threads_json()).unwrap();
        let list = threads.as_array().unwrap();
        assert!(!list.is_empty());
        let me = list.iter().find(|t| t["state"] == "RUNNABLE").expect("the thread reading /proc runs");
        assert!(me["threadID"].as_u64().unwrap() > 0);
        assert_eq!(me["interrupted"], false);
    }
}
