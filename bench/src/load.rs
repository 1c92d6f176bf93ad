//! The load generator: K telnet or HTTP `/api/put` connections, each on its own thread with blocking sockets,
//! sending bytes rendered before the clock starts; and a discard sink to check that the generator is not the
//! bottleneck.
//!
//! Connections are opened and threads started before the clock; a gate releases them all at once
//! ([`Clients::go`]), and the caller stops the clock on the server's own stored-points counter.

use crate::http;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Bytes per `write` call on a telnet connection.
const WRITE_CHUNK: usize = 256 << 10;
/// How much of what a server sends back on a telnet connection is kept for the report.
const KEEP_REPLY: usize = 4096;

/// What one connection did.
#[derive(Debug, Default)]
pub struct ConnOutcome {
    /// When its last byte was written (telnet) or its last response read (HTTP).
    pub done_at: Option<Instant>,
    pub bytes_sent: u64,
    /// HTTP: requests answered 2xx.
    pub requests_ok: u64,
    /// HTTP: requests answered otherwise, with the first answer.
    pub requests_failed: u64,
    pub first_failure: Option<String>,
    /// Telnet: bytes the server sent back (should be none), and the first of them.
    pub reply_bytes: u64,
    pub reply_head: Vec<u8>,
    /// An I/O error that ended the connection early.
    pub error: Option<String>,
}

/// What all connections did.
#[derive(Debug, Default)]
pub struct Outcome {
    pub conns: Vec<ConnOutcome>,
}

impl Outcome {
    /// When the last connection finished, if all did.
    pub fn all_done_at(&self) -> Option<Instant> {
        self.conns.iter().map(|c| c.done_at).collect::<Option<Vec<_>>>()?.into_iter().max()
    }
    pub fn bytes_sent(&self) -> u64 {
        self.conns.iter().map(|c| c.bytes_sent).sum()
    }
    pub fn reply_bytes(&self) -> u64 {
        self.conns.iter().map(|c| c.reply_bytes).sum()
    }
    pub fn first_reply(&self) -> Option<String> {
        self.conns
            .iter()
            .find(|c| !c.reply_head.is_empty())
            .map(|c| String::from_utf8_lossy(&c.reply_head).into_owned())
    }
    pub fn requests_failed(&self) -> u64 {
        self.conns.iter().map(|c| c.requests_failed).sum()
    }
    pub fn requests_ok(&self) -> u64 {
        self.conns.iter().map(|c| c.requests_ok).sum()
    }
    pub fn first_failure(&self) -> Option<String> {
        self.conns.iter().find_map(|c| c.first_failure.clone())
    }
    pub fn errors(&self) -> Vec<String> {
        self.conns.iter().filter_map(|c| c.error.clone()).collect()
    }
}

/// Holds the sending threads until the clock starts (or tells them to give up).
#[derive(Default)]
struct Gate {
    /// 0: wait, 1: go, 2: abort.
    state: Mutex<u8>,
    cv: Condvar,
}

impl Gate {
    fn set(&self, v: u8) {
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = v;
        self.cv.notify_all();
    }

    /// Waits for go (true) or abort (false).
    fn wait(&self) -> bool {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        while *s == 0 {
            s = self.cv.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        *s == 1
    }
}

/// A reader thread's result: bytes the server sent back, and the first of them.
type Replies = JoinHandle<(u64, Vec<u8>)>;

/// Connected client threads waiting for [`Clients::go`].
pub struct Clients {
    gate: Arc<Gate>,
    writers: Vec<JoinHandle<ConnOutcome>>,
    readers: Vec<Option<Replies>>,
    stop: Arc<AtomicBool>,
    /// Points acknowledged or written so far, for progress (updated per request / chunk).
    pub progress: Arc<AtomicU64>,
}

fn connect(addr: SocketAddr, io_timeout: Duration) -> io::Result<TcpStream> {
    let s = TcpStream::connect_timeout(&addr, Duration::from_secs(10))?;
    s.set_nodelay(true)?;
    s.set_write_timeout(Some(io_timeout))?;
    s.set_read_timeout(Some(io_timeout))?;
    Ok(s)
}

impl Clients {
    /// Opens one telnet connection per buffer; after [`Clients::go`] each writes its buffer and half-closes.
    /// A reader per connection collects whatever the server sends back until it closes.
    pub fn telnet(addr: SocketAddr, data: Arc<Vec<Vec<u8>>>, deadline: Instant) -> io::Result<Clients> {
        let mut clients = Clients::new();
        for c in 0..data.len() {
            let stream = connect(addr, Duration::from_secs(60))?;
            let reader = stream.try_clone()?;
            reader.set_read_timeout(Some(Duration::from_millis(100)))?;
            let stop_r = clients.stop.clone();
            clients.readers.push(Some(std::thread::spawn(move || read_replies(reader, &stop_r, deadline))));
            let (data, gate, progress) = (data.clone(), clients.gate.clone(), clients.progress.clone());
            clients.writers.push(std::thread::spawn(move || {
                let mut out = ConnOutcome::default();
                let mut stream = stream;
                if !gate.wait() {
                    let _ = stream.shutdown(Shutdown::Both);
                    return out;
                }
                let buf = &data[c];
                for chunk in buf.chunks(WRITE_CHUNK) {
                    if Instant::now() > deadline {
                        out.error = Some("deadline passed while writing".into());
                        break;
                    }
                    if let Err(e) = stream.write_all(chunk) {
                        out.error = Some(format!("write: {e}"));
                        break;
                    }
                    out.bytes_sent += chunk.len() as u64;
                    progress.fetch_add(chunk.len() as u64, Ordering::Relaxed);
                }
                if out.error.is_none() {
                    out.done_at = Some(Instant::now());
                }
                // Half-close: the server sees the end of input, stores what it read and closes its side.
                let _ = stream.shutdown(Shutdown::Write);
                out
            }));
        }
        Ok(clients)
    }

    /// Opens one keep-alive HTTP connection per request list; after [`Clients::go`] each sends its requests one
    /// at a time, reading each response.
    pub fn http(addr: SocketAddr, data: Arc<Vec<Vec<Vec<u8>>>>, deadline: Instant) -> io::Result<Clients> {
        let mut clients = Clients::new();
        for c in 0..data.len() {
            let mut conn = http::Conn::connect(addr, Duration::from_secs(120))?;
            let (data, gate, progress) = (data.clone(), clients.gate.clone(), clients.progress.clone());
            clients.writers.push(std::thread::spawn(move || {
                let mut out = ConnOutcome::default();
                if !gate.wait() {
                    return out;
                }
                for req in &data[c] {
                    if Instant::now() > deadline {
                        out.error = Some("deadline passed while sending".into());
                        break;
                    }
                    match conn.round_trip(req) {
                        Ok(resp) if (200..300).contains(&resp.status) => out.requests_ok += 1,
                        Ok(resp) => {
                            out.requests_failed += 1;
                            if out.first_failure.is_none() {
                                let text = resp.text();
                                out.first_failure = Some(format!("{} {}", resp.status, &text[..text.len().min(300)]));
                            }
                        }
                        Err(e) => {
                            out.error = Some(format!("request: {e}"));
                            break;
                        }
                    }
                    out.bytes_sent += req.len() as u64;
                    progress.fetch_add(1, Ordering::Relaxed);
                }
                if out.error.is_none() {
                    out.done_at = Some(Instant::now());
                }
                out
            }));
        }
        Ok(clients)
    }

    fn new() -> Clients {
        Clients {
            gate: Arc::default(),
            writers: Vec::new(),
            readers: Vec::new(),
            stop: Arc::default(),
            progress: Arc::default(),
        }
    }

    /// Releases every connection at once; returns the start of the clock.
    pub fn go(&self) -> Instant {
        let t0 = Instant::now();
        self.gate.set(1);
        t0
    }

    /// True once every sending thread has finished.
    pub fn all_finished(&self) -> bool {
        self.writers.iter().all(|w| w.is_finished())
    }

    /// Waits for the senders, then gives the readers up to `reply_grace` to see the server close.
    pub fn finish(mut self, reply_grace: Duration) -> Outcome {
        let mut conns: Vec<ConnOutcome> = std::mem::take(&mut self.writers)
            .into_iter()
            .map(|w| {
                w.join().unwrap_or_else(|_| ConnOutcome { error: Some("sender panicked".into()), ..Default::default() })
            })
            .collect();
        let until = Instant::now() + reply_grace;
        while Instant::now() < until && self.readers.iter().flatten().any(|r| !r.is_finished()) {
            std::thread::sleep(Duration::from_millis(10));
        }
        self.stop.store(true, Ordering::Relaxed);
        for (c, r) in self.readers.iter_mut().enumerate() {
            if let Some((n, head)) = r.take().and_then(|r| r.join().ok()) {
                conns[c].reply_bytes = n;
                conns[c].reply_head = head;
            }
        }
        Outcome { conns }
    }
}

impl Drop for Clients {
    fn drop(&mut self) {
        // Threads never released (an error before go()) give up; readers stop at their next timeout.
        let mut s = self.gate.state.lock().unwrap_or_else(|e| e.into_inner());
        if *s == 0 {
            *s = 2;
            self.gate.cv.notify_all();
        }
        drop(s);
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn read_replies(mut s: TcpStream, stop: &AtomicBool, deadline: Instant) -> (u64, Vec<u8>) {
    let mut buf = vec![0u8; 64 << 10];
    let (mut total, mut head) = (0u64, Vec::new());
    while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                total += n as u64;
                let keep = (KEEP_REPLY - head.len()).min(n);
                head.extend_from_slice(&buf[..keep]);
            }
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => continue,
            Err(_) => break,
        }
    }
    (total, head)
}

/// What the discard sink is told to speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SinkKind {
    /// Reads and drops.
    Telnet,
    /// Reads requests and answers each `204 No Content`.
    Http,
}

/// A local server that reads and drops (telnet) or answers `204` to every request (HTTP).
pub struct Sink {
    pub addr: SocketAddr,
    handle: JoinHandle<u64>,
}

impl Sink {
    /// Listens on 127.0.0.1 for `conns` connections (accepted within `deadline`).
    pub fn start(kind: SinkKind, conns: usize, deadline: Instant) -> io::Result<Sink> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        listener.set_nonblocking(true)?;
        let handle = std::thread::spawn(move || {
            let mut threads = Vec::new();
            while threads.len() < conns && Instant::now() < deadline {
                match listener.accept() {
                    Ok((s, _)) => {
                        let _ = s.set_nonblocking(false);
                        let _ = s.set_read_timeout(Some(Duration::from_secs(30)));
                        threads.push(std::thread::spawn(move || match kind {
                            SinkKind::Telnet => drain(s),
                            SinkKind::Http => answer(s),
                        }));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(1)),
                }
            }
            threads.into_iter().map(|t| t.join().unwrap_or(0)).sum()
        });
        Ok(Sink { addr, handle })
    }

    /// Bytes (telnet) or requests (HTTP) received, once every connection closed.
    pub fn join(self) -> u64 {
        self.handle.join().unwrap_or(0)
    }
}

fn drain(mut s: TcpStream) -> u64 {
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return total,
            Ok(n) => total += n as u64,
        }
    }
}

fn answer(s: TcpStream) -> u64 {
    let Ok(mut w) = s.try_clone() else { return 0 };
    let mut r = BufReader::with_capacity(1 << 20, s);
    let mut line = String::new();
    let mut requests = 0u64;
    loop {
        let mut length = 0usize;
        let mut first = true;
        loop {
            line.clear();
            match r.read_line(&mut line) {
                Ok(0) | Err(_) => return requests,
                Ok(_) => {}
            }
            if line == "\r\n" && !first {
                break;
            }
            first = false;
            if let Some(v) = line.strip_prefix("Content-Length:") {
                length = v.trim().parse().unwrap_or(0);
            }
        }
        if io::copy(&mut (&mut r).take(length as u64), &mut io::sink()).ok() != Some(length as u64) {
            return requests;
        }
        requests += 1;
        if w.write_all(b"HTTP/1.1 204 No Content\r\n\r\n").is_err() {
            return requests;
        }
    }
}

/// The generator's own rate against a discard sink: (items per second, elapsed) where items are the points
/// carried by the buffers.
pub fn sink_check_telnet(data: Arc<Vec<Vec<u8>>>, points: u64) -> io::Result<(f64, Duration)> {
    let deadline = Instant::now() + Duration::from_secs(300);
    let sink = Sink::start(SinkKind::Telnet, data.len(), deadline)?;
    let bytes: u64 = data.iter().map(|b| b.len() as u64).sum();
    let clients = Clients::telnet(sink.addr, data, deadline)?;
    let t0 = clients.go();
    let out = clients.finish(Duration::from_secs(10));
    let received = sink.join();
    let elapsed = out.all_done_at().unwrap_or_else(Instant::now).saturating_duration_since(t0);
    if received != bytes {
        return Err(io::Error::other(format!("sink received {received} of {bytes} bytes")));
    }
    Ok((points as f64 / elapsed.as_secs_f64(), elapsed))
}

/// As [`sink_check_telnet`] for HTTP requests (each answered by the sink).
pub fn sink_check_http(data: Arc<Vec<Vec<Vec<u8>>>>, points: u64) -> io::Result<(f64, Duration)> {
    let deadline = Instant::now() + Duration::from_secs(300);
    let sink = Sink::start(SinkKind::Http, data.len(), deadline)?;
    let requests: u64 = data.iter().map(|c| c.len() as u64).sum();
    let clients = Clients::http(sink.addr, data, deadline)?;
    let t0 = clients.go();
    let out = clients.finish(Duration::from_secs(1));
    let elapsed = out.all_done_at().unwrap_or_else(Instant::now).saturating_duration_since(t0);
    drop(out.conns);
    let answered = sink.join();
    if answered != requests {
        return Err(io::Error::other(format!("sink answered {answered} of {requests} requests")));
    }
    Ok((points as f64 / elapsed.as_secs_f64(), elapsed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::DataSet;

    #[test]
    fn telnet_and_http_reach_the_sink_whole() {
        let d = DataSet { name: "A", metrics: 3, hosts: 5, rounds: 4, last_ts: 1_795_302_470, names: "" };
        let (rate, _) = sink_check_telnet(Arc::new(d.render_telnet(2)), d.points()).unwrap();
        assert!(rate > 0.0);
        let (rate, _) = sink_check_http(Arc::new(d.render_http(2, 7)), d.points()).unwrap();
        assert!(rate > 0.0);
    }
}
