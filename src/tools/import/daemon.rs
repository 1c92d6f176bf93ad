//! Importing through a running daemon (the data directory is locked): lines are parsed one by one as the telnet
//! port parses them and posted in batches to its `/api/put?details`; the points it refuses are reported as bad
//! lines.
use std::io::{BufRead, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use indicatif::ProgressBar;
use rtsd_protocol::point::{DataPoint, Rules};
use rtsd_protocol::telnet::{self, Words};

use super::{ImportError, ImportOptions, ImportSummary, Sink};

/// Points per `/api/put` request when importing through a daemon.
const HTTP_BATCH_POINTS: usize = 5_000;

/// Reads one input line by line, parses each as the telnet port parses `put <line>`, and hands the points to
/// `writer` (bad lines are reported on `errors`; without `--skip-errors` the first one stops the input).
#[allow(clippy::too_many_arguments)]
pub(super) fn import_reader(
    mut reader: Box<dyn BufRead + Send>,
    path: &str,
    writer: &mut Writer<'_>,
    rules: &Rules,
    options: ImportOptions,
    summary: &mut ImportSummary,
    errors: &mut dyn Write,
    bar: &ProgressBar,
) -> Result<(), ImportError> {
    let mut line = Vec::with_capacity(256);
    let mut lineno = 0u64;
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(|source| ImportError::Read { path: path.to_string(), source })?;
        if n == 0 {
            return Ok(());
        }
        lineno += 1;
        // Java's readLine: a line ends at \n, \r\n or (not here: never seen in practice) a lone \r.
        let mut text: &[u8] = &line;
        if let Some(t) = text.strip_suffix(b"\n") {
            text = t;
        }
        if let Some(t) = text.strip_suffix(b"\r") {
            text = t;
        }
        if text.is_empty() {
            continue;
        }
        let mut words: Words<'_> = Words::new();
        words.push(b"put");
        words.extend(telnet::split_words(text));
        let outcome = match telnet::parse_put(&words, rules) {
            Ok(point) => {
                writer.add(&point, text, lineno);
                Ok(())
            }
            Err(e) => Err(e.to_string()),
        };
        match outcome {
            Ok(()) => {}
            Err(message) => {
                let _ = bar.suspend(|| writeln!(errors, "{path}:{lineno}: {message}"));
                summary.bad_lines += 1;
                if !options.skip_errors {
                    summary.stopped_at = Some(format!("{path}:{lineno}"));
                    return Ok(());
                }
            }
        }
        if writer.full() {
            writer.flush(summary, errors, path)?;
            if summary.stopped_at.is_some() {
                return Ok(());
            }
        }
        if lineno.is_multiple_of(65536) {
            bar.set_message(format!("{} points", summary.points + writer.pending()));
        }
    }
}

/// Collects points and posts them in batches to a daemon's `/api/put` (the store path is [`super::bulk`]).
pub(super) struct Writer<'a> {
    sink: &'a Sink<'a>,
    /// JSON objects of the pending points and the line each came from.
    json: Vec<(u64, String)>,
    /// A refused point is only known once its batch is answered: without `--skip-errors` the import stops
    /// after that batch.
    skip_errors: bool,
}

impl<'a> Writer<'a> {
    pub(super) fn new(sink: &'a Sink<'a>, skip_errors: bool) -> Writer<'a> {
        Writer { sink, json: Vec::new(), skip_errors }
    }

    fn pending(&self) -> u64 {
        self.json.len() as u64
    }

    fn full(&self) -> bool {
        self.json.len() >= HTTP_BATCH_POINTS
    }

    fn add(&mut self, point: &DataPoint<'_>, line: &[u8], lineno: u64) {
        self.json.push((lineno, point_json(point, line)));
    }

    pub(super) fn flush(
        &mut self,
        summary: &mut ImportSummary,
        errors: &mut dyn Write,
        path: &str,
    ) -> Result<(), ImportError> {
        let Sink::Daemon(addr) = self.sink else { return Ok(()) };
        if self.json.is_empty() {
            return Ok(());
        }
        let sent = std::mem::take(&mut self.json);
        let failures = post_points(*addr, &sent)?;
        summary.points += (sent.len() - failures.len()) as u64;
        for (lineno, message) in failures {
            let _ = writeln!(errors, "{path}:{lineno}: {message}");
            summary.bad_lines += 1;
            if summary.stopped_at.is_none() && !self.skip_errors {
                summary.stopped_at = Some(format!("{path}:{lineno}"));
            }
        }
        Ok(())
    }
}

/// One `/api/put` object; the value is sent as the text of the line, which `/api/put` parses as telnet does.
fn point_json(point: &DataPoint<'_>, line: &[u8]) -> String {
    use rtsd_protocol::http_json::json_string;
    let words = telnet::split_words(line);
    let value = words.get(2).map(|w| telnet::latin1(w)).unwrap_or_default();
    let mut o = String::with_capacity(128);
    o.push_str("{\"metric\":");
    o.push_str(&json_string(&point.metric));
    o.push_str(",\"timestamp\":");
    o.push_str(&point.timestamp.to_string());
    o.push_str(",\"value\":");
    o.push_str(&json_string(&value));
    o.push_str(",\"tags\":{");
    for (i, (k, v)) in point.tags.iter().enumerate() {
        if i > 0 {
            o.push(',');
        }
        o.push_str(&json_string(k));
        o.push(':');
        o.push_str(&json_string(v));
    }
    o.push_str("}}");
    o
}

/// POSTs a batch to `/api/put?details` and returns the (line, error) of every point the daemon refused.
fn post_points(addr: SocketAddr, points: &[(u64, String)]) -> Result<Vec<(u64, String)>, ImportError> {
    let fail = |message: String| ImportError::Daemon { addr, message };
    let mut body = String::with_capacity(points.iter().map(|p| p.1.len() + 1).sum::<usize>() + 2);
    body.push('[');
    for (i, (_, json)) in points.iter().enumerate() {
        if i > 0 {
            body.push(',');
        }
        body.push_str(json);
    }
    body.push(']');
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(10)).map_err(|e| fail(e.to_string()))?;
    stream.set_read_timeout(Some(Duration::from_secs(300))).map_err(|e| fail(e.to_string()))?;
    let head = format!(
        "POST /api/put?details HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream
        .write_all(head.as_bytes())
        .and_then(|_| stream.write_all(body.as_bytes()))
        .map_err(|e| fail(e.to_string()))?;
    let mut reply = Vec::new();
    stream.read_to_end(&mut reply).map_err(|e| fail(e.to_string()))?;
    let text = String::from_utf8_lossy(&reply);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status: u16 = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let parsed: serde_json::Value = serde_json::from_str(body)
        .map_err(|_| fail(format!("HTTP {status}: {}", body.chars().take(300).collect::<String>())))?;
    if status != 200 && status != 400 {
        return Err(fail(format!("HTTP {status}: {body}")));
    }
    // Match each reported datapoint to the first unclaimed line with the same metric and timestamp.
    let mut claimed = vec![false; points.len()];
    let mut out = Vec::new();
    for e in parsed.get("errors").and_then(|v| v.as_array()).into_iter().flatten() {
        let message = e.get("error").and_then(|v| v.as_str()).unwrap_or("refused").to_string();
        let dp = e.get("datapoint");
        let metric = dp.and_then(|d| d.get("metric")).and_then(|v| v.as_str()).unwrap_or("");
        let ts = dp.and_then(|d| d.get("timestamp")).and_then(|v| v.as_i64()).unwrap_or(0);
        let needle = format!("{{\"metric\":{},\"timestamp\":{ts},", rtsd_protocol::http_json::json_string(metric));
        let at = (0..points.len()).find(|&i| !claimed[i] && points[i].1.starts_with(&needle));
        let lineno = match at {
            Some(i) => {
                claimed[i] = true;
                points[i].0
            }
            None => 0,
        };
        out.push((lineno, message));
    }
    let failed = parsed.get("failed").and_then(|v| v.as_u64()).unwrap_or(out.len() as u64) as usize;
    while out.len() < failed {
        out.push((0, "refused by the daemon".into()));
    }
    Ok(out)
}

/// The daemon to import through when the directory is locked: the configured bind address (loopback when it
/// is the wildcard) and port.
pub fn daemon_addr(config: &crate::config::Config) -> Option<SocketAddr> {
    let host = if config.bind.is_unspecified() { "127.0.0.1".to_string() } else { config.bind.to_string() };
    (host.as_str(), config.port).to_socket_addrs().ok()?.next()
}
