//! A Chukwa agent, emulated closely enough to test rtsd's collector port the way a real agent drives it
//! (spec: chukwa.md §1-§4), written from the spec and independent of rtsd's own codec.
//!
//! * [`ChunkOut`] / [`encode_post`]: the POST body, `int32 N` then `N` `ChunkImpl.write` layouts (fixed-width
//!   big-endian integers, `writeUTF` strings in modified UTF-8).
//! * [`Agent`]: adaptors with the agent's offset bookkeeping. Each [`Agent::step`] reads what is new from every
//!   adaptor, posts it as `HttpConnector` does (absolute-form `POST http://host:port/chukwa`, keep-alive,
//!   optionally zlib + chunked like `chukwaAgent.output.compress`), and on `200` commits the chunks' seqIDs to
//!   the checkpoint. A post can lose its reply ([`Fate::ReplyLost`]: the collector answered, the agent never
//!   saw it) and be re-sent verbatim (commons-httpclient's retry); [`Agent::crash`] restarts every adaptor from
//!   its last checkpointed offset, as an agent restart does, with other read sizes, so resends have other chunk
//!   boundaries.
//! * Adaptors: [`FileTailer`] (`CharFileTailingAdaptorUTF8`: one record per line, seqID = start + bytes up to
//!   the last newline, at most `max_read` bytes per read; rotation resets the file offset and keeps
//!   `offsetOfFirstByte`, so offsets go backwards) and [`Sigar`] (`sigar.SystemMetrics`: one JSON sample per
//!   chunk, offsets from 0 on every agent run, the first sample of a run computed but not sent, nothing
//!   replayed after a crash).
//!
//! What the collector received is tracked ([`Agent::delivered_lines`], [`Agent::delivered_samples`]) so a test
//! can say exactly what must be stored, once.
use std::collections::BTreeSet;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;

use crate::{HttpConn, Response};

/// One chunk as the agent serializes it (`ChunkImpl`).
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkOut {
    pub seq_id: i64,
    pub source: String,
    pub tags: String,
    pub stream_name: String,
    pub data_type: String,
    /// Index of each record's last byte in `data`.
    pub record_ends: Vec<i32>,
    pub data: Vec<u8>,
}

impl ChunkOut {
    /// Appends `ChunkImpl.write`'s bytes.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&1i32.to_be_bytes());
        out.extend_from_slice(&self.seq_id.to_be_bytes());
        for s in [&self.source, &self.tags, &self.stream_name, &self.data_type, ""] {
            write_utf(s, out);
        }
        out.extend_from_slice(&(self.record_ends.len() as i32).to_be_bytes());
        for end in &self.record_ends {
            out.extend_from_slice(&end.to_be_bytes());
        }
        let len = self.record_ends.last().map_or(0, |&e| (e + 1) as usize);
        out.extend_from_slice(&self.data[..len]);
    }
}

/// `DataOutput.writeUTF`: the byte count as `u16`, then modified UTF-8 (NUL as `C0 80`, supplementary
/// characters as two 3-byte surrogates).
pub fn write_utf(s: &str, out: &mut Vec<u8>) {
    let mut enc = Vec::with_capacity(s.len());
    for unit in s.encode_utf16() {
        match unit {
            0x0001..=0x007F => enc.push(unit as u8),
            0x0000 | 0x0080..=0x07FF => {
                enc.push(0xC0 | (unit >> 6) as u8);
                enc.push(0x80 | (unit & 0x3F) as u8);
            }
            _ => {
                enc.push(0xE0 | (unit >> 12) as u8);
                enc.push(0x80 | ((unit >> 6) & 0x3F) as u8);
                enc.push(0x80 | (unit & 0x3F) as u8);
            }
        }
    }
    out.extend_from_slice(&(enc.len() as u16).to_be_bytes());
    out.extend_from_slice(&enc);
}

/// A POST body: the chunk count, then the chunks.
pub fn encode_post(chunks: &[ChunkOut]) -> Vec<u8> {
    let mut out = (chunks.len() as i32).to_be_bytes().to_vec();
    for c in chunks {
        c.write(&mut out);
    }
    out
}

/// zlib (Hadoop's `DefaultCodec`) of a whole body.
pub fn zlib(body: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(body).expect("zlib");
    enc.finish().expect("zlib")
}

/// `body` in HTTP/1.1 chunked transfer coding, in pieces of `piece` bytes.
pub fn chunked(body: &[u8], piece: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for p in body.chunks(piece.max(1)) {
        out.extend_from_slice(format!("{:x}\r\n", p.len()).as_bytes());
        out.extend_from_slice(p);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}

/// A connection to the collector port, posting as commons-httpclient 3.1 does.
pub struct CollectorConn {
    addr: SocketAddr,
    conn: HttpConn,
}

impl CollectorConn {
    pub fn new(addr: SocketAddr) -> CollectorConn {
        CollectorConn { addr, conn: HttpConn::new(addr) }
    }

    /// `POST http://<addr>/chukwa` (absolute form) with `body`; `compress` sends it zlib'd and chunked (the
    /// entity length is unknown then), as `chukwaAgent.output.compress=true` does.
    pub fn post(&mut self, body: &[u8], compress: bool) -> Response {
        let target = format!("http://{}/chukwa", self.addr);
        let mut headers =
            vec![("Content-Type", "application/octet-stream"), ("User-Agent", "Jakarta Commons-HttpClient/3.1")];
        let wire = if compress {
            headers.push(("Transfer-Encoding", "chunked"));
            chunked(&zlib(body), 4096)
        } else {
            body.to_vec()
        };
        self.conn.request("POST", &target, &headers, &wire)
    }
}

/// What happened to one post.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// 200 seen: the checkpoint advances.
    Committed,
    /// The collector answered but the agent never saw it (timeout, dropped connection).
    ReplyLost,
}

/// `CharFileTailingAdaptorUTF8` on one file.
#[derive(Debug, Clone)]
pub struct FileTailer {
    pub path: PathBuf,
    pub data_type: String,
    /// Largest read (`chukwaAgent.fileTailingAdaptor.maxReadSize`, 128 KiB by default).
    pub max_read: usize,
    /// Stream offset of the current file's byte 0 (`offsetOfFirstByte`).
    first_byte: i64,
    /// Next byte of the current file to read.
    file_offset: u64,
}

impl FileTailer {
    pub fn new(path: PathBuf, data_type: &str, max_read: usize) -> FileTailer {
        FileTailer { path, data_type: data_type.to_string(), max_read, first_byte: 0, file_offset: 0 }
    }

    /// The next chunk: up to `max_read` bytes, cut after the last complete line; one record per line.
    fn read(&mut self, source: &str, tags: &str) -> Option<ChunkOut> {
        let content = std::fs::read(&self.path).unwrap_or_default();
        let from = (self.file_offset as usize).min(content.len());
        let window = &content[from..(from + self.max_read).min(content.len())];
        let last_nl = window.iter().rposition(|&b| b == b'\n')?;
        let data = window[..=last_nl].to_vec();
        let record_ends: Vec<i32> =
            data.iter().enumerate().filter(|(_, &b)| b == b'\n').map(|(i, _)| i as i32).collect();
        self.file_offset += data.len() as u64;
        Some(ChunkOut {
            seq_id: self.first_byte + self.file_offset as i64,
            source: source.to_string(),
            tags: tags.to_string(),
            stream_name: self.path.display().to_string(),
            data_type: self.data_type.clone(),
            record_ends,
            data,
        })
    }

    /// Restarts at a checkpointed stream offset.
    fn seek(&mut self, offset: i64) {
        self.file_offset = (offset - self.first_byte).max(0) as u64;
    }

    /// The file was rotated: reading starts over at its byte 0 while `offsetOfFirstByte` stays (spec §4), so
    /// the stream's offsets go backwards.
    pub fn rotated(&mut self) {
        self.file_offset = 0;
    }
}

/// `sigar.SystemMetrics`: a JSON sample per chunk.
#[derive(Debug, Clone)]
pub struct Sigar {
    /// Sample timestamps (ms) still to come.
    pending: std::collections::VecDeque<i64>,
    /// Offset of this run's stream.
    offset: i64,
    /// The first sample of a run is computed but not sent.
    skip_next: bool,
}

impl Sigar {
    pub fn new() -> Sigar {
        Sigar { pending: Default::default(), offset: 0, skip_next: true }
    }

    /// Queues samples taken at these times.
    pub fn sample_at(&mut self, times: impl IntoIterator<Item = i64>) {
        self.pending.extend(times);
    }

    fn read(&mut self, source: &str, tags: &str) -> Option<ChunkOut> {
        let mut t = self.pending.pop_front()?;
        if std::mem::take(&mut self.skip_next) {
            // Computed, counted in the offset, never sent: the stream has a gap at its start.
            self.offset += sigar_json(t).len() as i64;
            t = self.pending.pop_front()?;
        }
        let data = sigar_json(t).into_bytes();
        self.offset += data.len() as i64;
        Some(ChunkOut {
            seq_id: self.offset,
            source: source.to_string(),
            tags: tags.to_string(),
            stream_name: "Sigar".to_string(),
            data_type: "SystemMetrics".to_string(),
            record_ends: vec![data.len() as i32 - 1],
            data,
        })
    }
}

impl Default for Sigar {
    fn default() -> Self {
        Sigar::new()
    }
}

/// A sigar sample as `SigarRunner` sends it (key names from sigar.jar; map values are strings), with values
/// that follow from the time so tests can predict them: two CPUs, `combined` = [`sigar_cpu_combined`].
pub fn sigar_json(t: i64) -> String {
    let (a, b) = sigar_cpus(t);
    let fs = "\"DirName\":\"/\",\"DevName\":\"/dev/sda1\",\"TypeName\":\"local\",\"SysTypeName\":\"ext4\",\"Options\":\"rw\",\"Type\":2,\"Flags\":0";
    format!(
        "{{\"disk\":[{{{fs},\"ReadBytes\":4096,\"Reads\":1,\"WriteBytes\":8192,\"Writes\":2,\"Total\":1000,\"Used\":250}}],\
         \"cpu\":[{{\"Vendor\":\"Intel\",\"Model\":\"Xeon\",\"Mhz\":\"2400\",\"combined\":{a},\"user\":{a},\"sys\":0.0,\"idle\":{ia},\"wait\":0.0,\"nice\":0.0,\"irq\":0.0}},\
         {{\"Vendor\":\"Intel\",\"Model\":\"Xeon\",\"Mhz\":\"2400\",\"combined\":{b},\"user\":{b},\"sys\":0.0,\"idle\":{ib},\"wait\":0.0,\"nice\":0.0,\"irq\":0.0}}],\
         \"timestamp\":{t},\"uptime\":{up},\"loadavg\":[0.5,0.25,0.125],\
         \"memory\":{{\"Total\":\"8589934592\",\"Ram\":\"8192\",\"Used\":\"4294967296\",\"Free\":\"4294967296\",\"ActualUsed\":\"1\",\"ActualFree\":\"2\",\"UsedPercent\":\"50.0\",\"FreePercent\":\"50.0\"}},\
         \"swap\":{{\"Total\":\"0\",\"Used\":\"0\",\"Free\":\"0\",\"PageIn\":\"0\",\"PageOut\":\"0\"}},\
         \"network\":[{{\"RxBytes\":999,\"TxBytes\":999}},{{\"RxBytes\":100,\"TxBytes\":50,\"RxPackets\":3,\"Speed\":\"1000\"}},{{\"RxBytes\":20,\"TxBytes\":5}}]}}",
        ia = 1.0 - a,
        ib = 1.0 - b,
        up = t / 1000,
    )
}

/// The two CPUs' `combined` of the sample at `t` (exact binary fractions, so means print exactly).
pub fn sigar_cpus(t: i64) -> (f64, f64) {
    let i = (t / 1000) % 8;
    (i as f64 / 8.0, 0.5)
}

/// `SystemMetrics.cpu.combined` of the sample at `t`: the mean of the CPUs.
pub fn sigar_cpu_combined(t: i64) -> f64 {
    let (a, b) = sigar_cpus(t);
    (a + b) / 2.0
}

/// One adaptor of the agent, with its checkpointed (acknowledged) offset.
#[derive(Debug, Clone)]
pub enum Adaptor {
    File(FileTailer),
    Sigar(Sigar),
}

/// The agent: adaptors, checkpoint, and what the collector received.
pub struct Agent {
    pub source: String,
    pub tags: String,
    pub adaptors: Vec<Adaptor>,
    /// Acknowledged seqID per adaptor (the checkpoint file).
    pub checkpoint: Vec<i64>,
    /// Chunks sent but not acknowledged, with their adaptor: what a crash re-reads.
    unacked: Vec<(usize, ChunkOut)>,
    /// Every chunk the collector received in some post (acknowledged or not), for the test's expectations.
    received: Vec<ChunkOut>,
    pub compress: bool,
    conn: CollectorConn,
    collector: SocketAddr,
    /// The last post's body and chunks, for a verbatim re-send.
    last_body: Vec<u8>,
    last_chunks: Vec<(usize, ChunkOut)>,
}

impl Agent {
    pub fn new(collector: SocketAddr, source: &str, cluster: &str, adaptors: Vec<Adaptor>) -> Agent {
        let n = adaptors.len();
        Agent {
            source: source.to_string(),
            // DataFactory.addDefaultTag: a leading space.
            tags: format!(" cluster=\"{cluster}\""),
            adaptors,
            checkpoint: vec![0; n],
            unacked: Vec::new(),
            received: Vec::new(),
            compress: false,
            conn: CollectorConn::new(collector),
            collector,
            last_body: Vec::new(),
            last_chunks: Vec::new(),
        }
    }

    /// The collector moved (a restarted daemon on the same port): a new connection.
    pub fn reconnect(&mut self) {
        self.conn = CollectorConn::new(self.collector);
    }

    /// The agent's collector list moves on to the next collector (Chukwa's `RetryListOfCollectors` after a
    /// failed post): a new connection to `collector`.
    pub fn fail_over(&mut self, collector: SocketAddr) {
        self.collector = collector;
        self.reconnect();
    }

    /// Reads every adaptor once (at most `rounds` chunks each) and posts the chunks. Panics unless the collector
    /// answers 200 with one `ok` line per chunk. Returns the number of chunks posted.
    pub fn step(&mut self, rounds: usize, fate: Fate) -> usize {
        let mut chunks: Vec<(usize, ChunkOut)> = Vec::new();
        for _ in 0..rounds {
            for (i, a) in self.adaptors.iter_mut().enumerate() {
                let c = match a {
                    Adaptor::File(f) => f.read(&self.source, &self.tags),
                    Adaptor::Sigar(s) => s.read(&self.source, &self.tags),
                };
                if let Some(c) = c {
                    chunks.push((i, c));
                }
            }
        }
        if chunks.is_empty() {
            return 0;
        }
        let body = encode_post(&chunks.iter().map(|(_, c)| c.clone()).collect::<Vec<_>>());
        self.send(&body, &chunks);
        self.last_body = body;
        self.last_chunks = chunks.clone();
        self.received.extend(chunks.iter().map(|(_, c)| c.clone()));
        match fate {
            Fate::Committed => self.commit(&chunks),
            Fate::ReplyLost => self.unacked.extend(chunks.iter().cloned()),
        }
        chunks.len()
    }

    /// Re-sends the last post byte for byte (commons-httpclient re-executing after a timeout); this time the
    /// reply arrives.
    pub fn resend_last(&mut self) {
        let (body, last) = (self.last_body.clone(), self.last_chunks.clone());
        self.send(&body, &last);
        self.unacked.retain(|u| !last.contains(u));
        self.commit(&last);
    }

    fn send(&mut self, body: &[u8], chunks: &[(usize, ChunkOut)]) {
        let reply = self.conn.post(body, self.compress);
        assert_eq!(reply.status, 200, "post refused: {}", reply.text());
        let expected: String = chunks
            .iter()
            .map(|(_, c)| format!("ok: {} bytes ending at offset {}\n", c.data.len(), c.seq_id - 1))
            .collect();
        assert_eq!(reply.text(), expected);
    }

    fn commit(&mut self, chunks: &[(usize, ChunkOut)]) {
        for (i, c) in chunks {
            // ChukwaAgent.reportCommit keeps the maximum.
            self.checkpoint[*i] = self.checkpoint[*i].max(c.seq_id);
        }
    }

    /// The agent dies and starts again from its checkpoint: unacknowledged file data is re-read (with
    /// `max_read` as the new read size); sigar starts a new run at offset 0, its lost samples gone.
    pub fn crash(&mut self, max_read: usize) {
        self.unacked.clear();
        for (i, a) in self.adaptors.iter_mut().enumerate() {
            match a {
                Adaptor::File(f) => {
                    f.seek(self.checkpoint[i]);
                    f.max_read = max_read;
                }
                Adaptor::Sigar(s) => {
                    s.offset = 0;
                    s.skip_next = true;
                    self.checkpoint[i] = 0;
                }
            }
        }
        self.reconnect();
    }

    pub fn file(&mut self, i: usize) -> &mut FileTailer {
        match &mut self.adaptors[i] {
            Adaptor::File(f) => f,
            Adaptor::Sigar(_) => panic!("adaptor {i} is sigar"),
        }
    }

    pub fn sigar(&mut self, i: usize) -> &mut Sigar {
        match &mut self.adaptors[i] {
            Adaptor::Sigar(s) => s,
            Adaptor::File(_) => panic!("adaptor {i} is a file"),
        }
    }

    /// Every distinct line the collector received from file adaptors of `data_type` (each must be stored
    /// once; the test's lines are unique).
    pub fn delivered_lines(&self, data_type: &str) -> BTreeSet<String> {
        self.received
            .iter()
            .filter(|c| c.data_type == data_type)
            .flat_map(|c| String::from_utf8_lossy(&c.data).lines().map(str::to_string).collect::<Vec<_>>())
            .collect()
    }

    /// The timestamps of every sigar sample the collector received.
    pub fn delivered_samples(&self) -> BTreeSet<i64> {
        self.received
            .iter()
            .filter(|c| c.data_type == "SystemMetrics")
            .filter_map(|c| {
                let v: serde_json::Value = serde_json::from_slice(&c.data).ok()?;
                v["timestamp"].as_i64()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The spec's §2.1 worked example, byte for byte.
    #[test]
    fn worked_example_body() {
        let c = ChunkOut {
            seq_id: 8,
            source: "host1".into(),
            tags: " cluster=\"demo\"".into(),
            stream_name: "/var/log/app.log".into(),
            data_type: "AppLog".into(),
            record_ends: vec![3, 7],
            data: b"a=1\nb=2\n".to_vec(),
        };
        let body = encode_post(&[c]);
        assert_eq!(body.len(), 88);
        assert_eq!(&body[..16], &[0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 8]);
        assert_eq!(&body[0x42..0x50], &[0, 0, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 7][..]);
        assert_eq!(&body[0x50..], b"a=1\nb=2\n");
    }

    /// §8.7 vector 3: NUL, é, 😀 in modified UTF-8.
    #[test]
    fn modified_utf8() {
        let mut out = Vec::new();
        write_utf("\0é😀", &mut out);
        assert_eq!(out, [0x00, 0x0a, 0xc0, 0x80, 0xc3, 0xa9, 0xed, 0xa0, 0xbd, 0xed, 0xb8, 0x80]);
    }

    #[test]
    fn sigar_samples_are_json() {
        let v: serde_json::Value = serde_json::from_str(&sigar_json(1_700_000_003_000)).unwrap();
        assert_eq!(v["timestamp"], 1_700_000_003_000i64);
        assert_eq!(sigar_cpu_combined(1_700_000_003_000), (3.0 / 8.0 + 0.5) / 2.0);
    }
}
