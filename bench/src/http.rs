//! A minimal HTTP/1.1 client over blocking std sockets: enough for `/metrics`, queries and `/api/put` against
//! loopback servers. Responses are read by `Content-Length`, chunked encoding, or to the end of the connection.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// A response: status and body (chunked bodies are decoded).
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub body: Vec<u8>,
}

impl Response {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Largest response accepted: a full-day q1 answer is ~50 KB; /metrics a few hundred KB.
const MAX_BODY: usize = 256 << 20;

/// One keep-alive connection.
pub struct Conn {
    addr: SocketAddr,
    reader: BufReader<TcpStream>,
}

impl Conn {
    pub fn connect(addr: SocketAddr, timeout: Duration) -> io::Result<Conn> {
        let stream = TcpStream::connect_timeout(&addr, timeout)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        Ok(Conn { addr, reader: BufReader::with_capacity(64 << 10, stream) })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Sends complete request bytes and reads the response.
    pub fn round_trip(&mut self, request: &[u8]) -> io::Result<Response> {
        self.reader.get_mut().write_all(request)?;
        read_response(&mut self.reader)
    }

    /// `GET path`.
    pub fn get(&mut self, path: &str) -> io::Result<Response> {
        let req = format!("GET {path} HTTP/1.1\r\nHost: {}\r\nAccept: */*\r\n\r\n", self.addr);
        self.round_trip(req.as_bytes())
    }

    /// `POST path` with a JSON body.
    pub fn post(&mut self, path: &str, body: &[u8]) -> io::Result<Response> {
        let mut req = format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            self.addr,
            body.len()
        )
        .into_bytes();
        req.extend_from_slice(body);
        self.round_trip(&req)
    }
}

/// `GET` on a fresh connection.
pub fn get(addr: SocketAddr, path: &str, timeout: Duration) -> io::Result<Response> {
    Conn::connect(addr, timeout)?.get(path)
}

/// `POST` on a fresh connection.
pub fn post(addr: SocketAddr, path: &str, body: &[u8], timeout: Duration) -> io::Result<Response> {
    Conn::connect(addr, timeout)?.post(path, body)
}

fn bad(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

/// Reads one response (status line, headers, body) from `r`.
pub fn read_response(r: &mut impl BufRead) -> io::Result<Response> {
    let mut line = String::new();
    if r.read_line(&mut line)? == 0 {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed before a response"));
    }
    let status: u16 = line
        .split(' ')
        .nth(1)
        .and_then(|s| s.trim().parse().ok())
        .ok_or_else(|| bad(format!("bad status line {line:?}")))?;
    let mut content_length = None;
    let mut chunked = false;
    for _ in 0..200 {
        line.clear();
        if r.read_line(&mut line)? == 0 {
            return Err(bad("connection closed in the headers"));
        }
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
            if k == "content-length" {
                content_length = Some(v.parse::<usize>().map_err(|_| bad("bad content-length"))?);
            } else if k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked") {
                chunked = true;
            }
        }
    }
    let mut body = Vec::new();
    if status == 204 || status == 304 || (100..200).contains(&status) {
        // No body.
    } else if chunked {
        loop {
            line.clear();
            r.read_line(&mut line)?;
            let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
                .map_err(|_| bad(format!("bad chunk size {line:?}")))?;
            if body.len() + size > MAX_BODY {
                return Err(bad("response too large"));
            }
            if size == 0 {
                // Trailers, then the empty line.
                for _ in 0..100 {
                    line.clear();
                    if r.read_line(&mut line)? == 0 || line.trim().is_empty() {
                        break;
                    }
                }
                break;
            }
            let start = body.len();
            body.resize(start + size, 0);
            r.read_exact(&mut body[start..])?;
            line.clear();
            r.read_line(&mut line)?;
        }
    } else if let Some(n) = content_length {
        if n > MAX_BODY {
            return Err(bad("response too large"));
        }
        body.resize(n, 0);
        r.read_exact(&mut body)?;
    } else {
        r.take(MAX_BODY as u64).read_to_end(&mut body)?;
    }
    Ok(Response { status, body })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_length_chunked_and_empty_bodies() {
        let mut input: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\nHTTP/1.1 204 No Content\r\nDate: x\r\n\r\n";
        let r = read_response(&mut input).unwrap();
        assert_eq!((r.status, r.body.as_slice()), (200, &b"hello"[..]));
        let r = read_response(&mut input).unwrap();
        assert_eq!((r.status, r.body.as_slice()), (200, &b"abcde"[..]));
        let r = read_response(&mut input).unwrap();
        assert_eq!((r.status, r.body.len()), (204, 0));
        assert!(read_response(&mut input).is_err());
    }
}
