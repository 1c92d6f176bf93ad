//! One TCP connection to one HBase server (a region server, or the master), carrying any number of concurrent
//! calls told apart by call id.
//!
//! Wire format (HBase's RpcServer, no SASL, no cell blocks):
//! - once: `HBas`, version 0, auth 0x50 (SIMPLE), then a 4-byte big-endian length and a `ConnectionHeader`; the
//!   server sends nothing back;
//! - per call: a 4-byte length, then a varint-delimited `RequestHeader` and the varint-delimited request;
//! - per answer: a 4-byte length, a varint-delimited `ResponseHeader` (call id, maybe an exception), then the
//!   varint-delimited response. Answers come in any order.
//!
//! Calls in flight on one connection are limited ([`Conn::connect`]'s `max_in_flight`): a region server queues at most
//! `hbase.ipc.server.max.callqueue.length` calls (10 per handler by default) and refuses the rest with
//! `CallQueueTooBigException`, which costs the caller a retry's pause; a call over the limit waits here instead.
//!
//! A writer task owns the write half (batching frames queued while it writes), a reader task owns the read half
//! and hands each answer to its waiting caller. When either side fails, every call in flight fails with
//! [`Error::Connection`] and the connection is marked closed, so the pool opens a new one.
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Buf, Bytes};
use prost::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufWriter};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, Semaphore};
use tokio::task::JoinHandle;

use crate::error::{Error, Result};
use crate::proto;

/// The largest answer accepted (HBase's default `hbase.server.scanner.max.result.size` is 100 MiB; a Multi's
/// answer is bounded by what was asked).
const MAX_FRAME: usize = 256 << 20;

type Reply = oneshot::Sender<Result<Bytes>>;

struct Calls {
    waiting: HashMap<u32, Reply>,
    /// Set once the connection failed; later calls fail at once.
    closed: Option<Error>,
}

/// A connection to one server. Cheap to share (`Arc`); dropping the last handle stops its tasks.
pub struct Conn {
    addr: String,
    frames: mpsc::UnboundedSender<Vec<u8>>,
    calls: Arc<Mutex<Calls>>,
    next_id: AtomicU32,
    /// One permit per call that may be in flight.
    in_flight: Semaphore,
    tasks: [JoinHandle<()>; 2],
}

impl Conn {
    /// Connects and sends the preamble and connection header for `service` ("ClientService"). At most
    /// `max_in_flight` calls are under way at once; later ones wait for an answer.
    pub async fn connect(
        addr: &str,
        user: &str,
        service: &str,
        timeout: Duration,
        max_in_flight: usize,
    ) -> Result<Conn> {
        let fail = |detail: String| Error::Connection { addr: addr.to_string(), detail };
        let stream = match tokio::time::timeout(timeout, TcpStream::connect(addr)).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => return Err(fail(e.to_string())),
            Err(_) => return Err(fail(format!("connect timed out after {timeout:?}"))),
        };
        stream.set_nodelay(true).map_err(|e| fail(e.to_string()))?;
        let (mut rd, wr) = stream.into_split();
        let mut wr = BufWriter::with_capacity(64 << 10, wr);

        let header = proto::ConnectionHeader {
            user_info: Some(proto::UserInformation { effective_user: user.to_string() }),
            service_name: Some(service.to_string()),
        };
        let mut hello = b"HBas\x00\x50".to_vec();
        hello.extend_from_slice(&(header.encoded_len() as u32).to_be_bytes());
        header.encode(&mut hello).expect("Vec grows");
        wr.write_all(&hello).await.map_err(|e| fail(e.to_string()))?;
        wr.flush().await.map_err(|e| fail(e.to_string()))?;

        let calls = Arc::new(Mutex::new(Calls { waiting: HashMap::new(), closed: None }));
        let (frames, mut queue) = mpsc::unbounded_channel::<Vec<u8>>();

        let writer_calls = calls.clone();
        let writer_addr = addr.to_string();
        let writer = tokio::spawn(async move {
            while let Some(frame) = queue.recv().await {
                let mut res = wr.write_all(&frame).await;
                // Frames queued meanwhile go out in the same flush.
                while res.is_ok() {
                    match queue.try_recv() {
                        Ok(frame) => res = wr.write_all(&frame).await,
                        Err(_) => break,
                    }
                }
                if let Err(e) = res.and(wr.flush().await) {
                    fail_all(&writer_calls, Error::Connection { addr: writer_addr, detail: format!("write: {e}") });
                    return;
                }
            }
            let _ = wr.shutdown().await;
        });

        let reader_calls = calls.clone();
        let reader_addr = addr.to_string();
        let reader = tokio::spawn(async move {
            let err = match read_loop(&mut rd, &reader_calls).await {
                Ok(()) => "closed by the server".to_string(),
                Err(e) => e,
            };
            fail_all(&reader_calls, Error::Connection { addr: reader_addr, detail: err });
        });

        Ok(Conn {
            addr: addr.to_string(),
            frames,
            calls,
            next_id: AtomicU32::new(1),
            in_flight: Semaphore::new(max_in_flight.clamp(1, Semaphore::MAX_PERMITS)),
            tasks: [writer, reader],
        })
    }

    /// Whether the connection failed (a new one is needed).
    pub fn is_closed(&self) -> bool {
        self.calls.lock().unwrap().closed.is_some()
    }

    /// One call: `method` of the connection's service with `request`; the decoded response, or the server's
    /// exception as [`Error::Remote`]. `timeout` bounds the wait, for a turn included (and is passed to the server as
    /// the call's own).
    pub async fn call<Req: Message, Resp: Message + Default>(
        &self,
        method: &str,
        request: &Req,
        timeout: Duration,
    ) -> Result<Resp> {
        let deadline = tokio::time::Instant::now() + timeout;
        let _turn = match tokio::time::timeout_at(deadline, self.in_flight.acquire()).await {
            Ok(Ok(permit)) => permit,
            Ok(Err(_)) => unreachable!("the semaphore is never closed"),
            Err(_) => return Err(Error::RpcTimeout { addr: self.addr.clone(), timeout }),
        };
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) & 0x7fff_ffff;
        let header = proto::RequestHeader {
            call_id: Some(id),
            method_name: Some(method.to_string()),
            request_param: Some(true),
            timeout: Some(timeout.as_millis().min(u32::MAX as u128) as u32),
        };
        let len = length_delimited_len(&header) + length_delimited_len(request);
        let mut frame = Vec::with_capacity(4 + len);
        frame.extend_from_slice(&(len as u32).to_be_bytes());
        header.encode_length_delimited(&mut frame).expect("Vec grows");
        request.encode_length_delimited(&mut frame).expect("Vec grows");

        let (tx, rx) = oneshot::channel();
        {
            let mut calls = self.calls.lock().unwrap();
            if let Some(e) = &calls.closed {
                return Err(e.clone());
            }
            calls.waiting.insert(id, tx);
        }
        if self.frames.send(frame).is_err() {
            self.calls.lock().unwrap().waiting.remove(&id);
            return Err(Error::Connection { addr: self.addr.clone(), detail: "writer stopped".into() });
        }
        let body = match tokio::time::timeout_at(deadline, rx).await {
            Ok(Ok(res)) => res?,
            Ok(Err(_)) => {
                return Err(Error::Connection { addr: self.addr.clone(), detail: "connection dropped".into() })
            }
            Err(_) => {
                self.calls.lock().unwrap().waiting.remove(&id);
                return Err(Error::RpcTimeout { addr: self.addr.clone(), timeout });
            }
        };
        Resp::decode(body).map_err(|e| Error::Protocol(format!("{method} response from {}: {e}", self.addr)))
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

fn length_delimited_len<M: Message>(m: &M) -> usize {
    let n = m.encoded_len();
    n + prost::length_delimiter_len(n)
}

fn fail_all(calls: &Mutex<Calls>, err: Error) {
    let waiting = {
        let mut calls = calls.lock().unwrap();
        calls.closed.get_or_insert(err.clone());
        std::mem::take(&mut calls.waiting)
    };
    for (_, reply) in waiting {
        let _ = reply.send(Err(err.clone()));
    }
}

/// Reads answers until the stream ends; `Err` carries why it stopped.
async fn read_loop(rd: &mut tokio::net::tcp::OwnedReadHalf, calls: &Mutex<Calls>) -> Result<(), String> {
    loop {
        let len = match rd.read_u32().await {
            Ok(n) => n as usize,
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(format!("read: {e}")),
        };
        if len > MAX_FRAME {
            return Err(format!("answer of {len} bytes"));
        }
        let mut buf = vec![0u8; len];
        rd.read_exact(&mut buf).await.map_err(|e| format!("read: {e}"))?;
        let mut buf = Bytes::from(buf);
        let header = proto::ResponseHeader::decode_length_delimited(&mut buf)
            .map_err(|e| format!("undecodable response header: {e}"))?;
        let Some(id) = header.call_id else {
            // A header without a call id is the server's connection-level error (e.g. a bad preamble): fatal.
            let ex = header.exception.unwrap_or_default();
            return Err(format!(
                "server error {}: {}",
                ex.exception_class_name.unwrap_or_default(),
                ex.stack_trace.unwrap_or_default().lines().next().unwrap_or_default()
            ));
        };
        let result = match header.exception {
            Some(ex) => Err(Error::remote(
                ex.exception_class_name.as_deref().unwrap_or("UnknownException"),
                ex.stack_trace.as_deref().unwrap_or_default(),
                ex.do_not_retry.unwrap_or(false),
            )),
            None => match prost::decode_length_delimiter(&mut buf) {
                Ok(n) if n <= buf.remaining() => Ok(buf.slice(..n)),
                _ => Err(Error::Protocol("truncated response body".into())),
            },
        };
        // A call that timed out on our side is no longer waiting: its late answer is dropped.
        let reply = calls.lock().unwrap().waiting.remove(&id);
        if let Some(reply) = reply {
            let _ = reply.send(result);
        }
    }
}
