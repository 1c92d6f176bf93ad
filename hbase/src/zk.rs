//! Where `hbase:meta` is (one ZooKeeper `getData` of `<basedir>/meta-region-server`), and where the active master
//! is (`<basedir>/master`, for the admin calls).
//!
//! The client needs nothing else from ZooKeeper, so instead of a full ZooKeeper client this speaks the few
//! messages of ZooKeeper's binary protocol that one read needs (all big-endian, each frame length-prefixed):
//! a session handshake (`ConnectRequest`/`ConnectResponse`), one `getData` (op 4), and `closeSession` (op -11) so
//! the server drops the session at once instead of after its timeout. A fresh session per lookup keeps the client
//! free of session state; lookups happen only when `hbase:meta` moved or at start.
use std::time::Duration;

use prost::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::error::{Error, Result};
use crate::proto;

const OP_GET_DATA: i32 = 4;
const OP_CLOSE: i32 = -11;
/// ZooKeeper's error code for a missing znode.
const ZNONODE: i32 = -101;
/// The largest frame accepted from ZooKeeper (a znode holds at most 1 MiB).
const MAX_FRAME: usize = 4 << 20;

/// Reads `<basedir>/meta-region-server` from the first quorum member that answers; returns `host:port` of the
/// region server holding `hbase:meta`.
pub async fn meta_server(quorum: &str, basedir: &str, timeout: Duration) -> Result<String> {
    let data = read(quorum, basedir, "meta-region-server", timeout).await?;
    parse_meta_region_server(&data)
}

/// Reads `<basedir>/master`; returns `host:port` of the active master's RPC endpoint.
pub async fn master_server(quorum: &str, basedir: &str, timeout: Duration) -> Result<String> {
    let data = read(quorum, basedir, "master", timeout).await?;
    parse_master(&data)
}

/// The data of `<basedir>/<znode>` from the first quorum member that answers.
async fn read(quorum: &str, basedir: &str, znode: &str, timeout: Duration) -> Result<Vec<u8>> {
    let path = format!("{}/{znode}", basedir.trim_end_matches('/'));
    let mut last = Error::ZooKeeper(format!("empty quorum {quorum:?}"));
    for host in quorum.split(',').map(str::trim).filter(|h| !h.is_empty()) {
        // A quorum entry without a port uses ZooKeeper's default, as HBase's own configuration does.
        let addr = if host.contains(':') { host.to_string() } else { format!("{host}:2181") };
        match tokio::time::timeout(timeout, get_data(&addr, &path)).await {
            Ok(Ok(data)) => return Ok(data),
            Ok(Err(e)) => last = e,
            Err(_) => last = Error::ZooKeeper(format!("{addr}: no answer within {timeout:?}")),
        }
    }
    Err(last)
}

/// The znode's bytes: `0xFF`, a 4-byte metadata length, the metadata, `PBUF`, then `MetaRegionServer`.
pub fn parse_meta_region_server(data: &[u8]) -> Result<String> {
    let m: proto::MetaRegionServer = decode_znode("meta-region-server", data)?;
    address("meta-region-server", &m.server)
}

/// The `master` znode: the same framing as `meta-region-server`, then `Master`.
pub fn parse_master(data: &[u8]) -> Result<String> {
    let m: proto::Master = decode_znode("master", data)?;
    address("master", &m.master)
}

/// An HBase znode's protobuf payload: `0xFF`, a 4-byte metadata length, the metadata, `PBUF`, then the message.
fn decode_znode<M: Message + Default>(znode: &str, data: &[u8]) -> Result<M> {
    let bad = |why: &str| Error::ZooKeeper(format!("{znode} znode {why}"));
    if data.first() != Some(&0xFF) || data.len() < 5 {
        return Err(bad("lacks the 0xFF magic"));
    }
    let meta_len = u32::from_be_bytes(data[1..5].try_into().unwrap()) as usize;
    let rest = data.get(5 + meta_len..).ok_or_else(|| bad("is truncated"))?;
    let pb = rest.strip_prefix(b"PBUF").ok_or_else(|| bad("lacks PBUF"))?;
    M::decode(pb).map_err(|e| bad(&format!("does not decode: {e}")))
}

fn address(znode: &str, server: &proto::ServerName) -> Result<String> {
    let port = server.port.ok_or_else(|| Error::ZooKeeper(format!("{znode} znode has no port")))?;
    Ok(format!("{}:{}", server.host_name, port))
}

async fn get_data(addr: &str, path: &str) -> Result<Vec<u8>> {
    let io = |e: std::io::Error| Error::ZooKeeper(format!("{addr}: {e}"));
    let mut s = TcpStream::connect(addr).await.map_err(io)?;
    s.set_nodelay(true).map_err(io)?;

    // ConnectRequest: protocolVersion, lastZxidSeen, timeOut (ms), sessionId, passwd (16 zero bytes), readOnly.
    let mut req = Vec::with_capacity(48);
    req.extend_from_slice(&0i32.to_be_bytes());
    req.extend_from_slice(&0i64.to_be_bytes());
    req.extend_from_slice(&10_000i32.to_be_bytes());
    req.extend_from_slice(&0i64.to_be_bytes());
    req.extend_from_slice(&16i32.to_be_bytes());
    req.extend_from_slice(&[0u8; 16]);
    req.push(0);
    write_frame(&mut s, &req).await.map_err(io)?;
    let resp = read_frame(&mut s).await.map_err(io)?;
    // ConnectResponse: protocolVersion(4) timeOut(4) sessionId(8) ...; a zero timeout means the server refused.
    if resp.len() < 16 || i32::from_be_bytes(resp[4..8].try_into().unwrap()) <= 0 {
        return Err(Error::ZooKeeper(format!("{addr}: session refused")));
    }

    // getData: header (xid, op), path as a length-prefixed string, watch=false.
    let mut req = Vec::with_capacity(16 + path.len());
    req.extend_from_slice(&1i32.to_be_bytes());
    req.extend_from_slice(&OP_GET_DATA.to_be_bytes());
    req.extend_from_slice(&(path.len() as i32).to_be_bytes());
    req.extend_from_slice(path.as_bytes());
    req.push(0);
    write_frame(&mut s, &req).await.map_err(io)?;
    let resp = read_frame(&mut s).await.map_err(io)?;
    // ReplyHeader: xid(4) zxid(8) err(4); then the data as a length-prefixed buffer (and a Stat we skip).
    if resp.len() < 16 {
        return Err(Error::ZooKeeper(format!("{addr}: short getData reply")));
    }
    let err = i32::from_be_bytes(resp[12..16].try_into().unwrap());
    let result = match err {
        0 => {
            let len = resp.get(16..20).map(|b| i32::from_be_bytes(b.try_into().unwrap())).unwrap_or(-1);
            if len < 0 || resp.len() < 20 + len as usize {
                Err(Error::ZooKeeper(format!("{addr}: {path} has no data")))
            } else {
                Ok(resp[20..20 + len as usize].to_vec())
            }
        }
        // Before the master has assigned meta (or under a wrong basedir) the znode is missing: retriable, since a
        // starting cluster creates it.
        ZNONODE => Err(Error::ZooKeeper(format!("{addr}: no znode {path} (is zk_basedir right? is HBase up?)"))),
        e => Err(Error::ZooKeeper(format!("{addr}: getData {path} failed with code {e}"))),
    };

    let mut close = Vec::with_capacity(8);
    close.extend_from_slice(&2i32.to_be_bytes());
    close.extend_from_slice(&OP_CLOSE.to_be_bytes());
    // Best effort: a session left open expires by itself after its timeout.
    let _ = write_frame(&mut s, &close).await;
    result
}

async fn write_frame(s: &mut TcpStream, body: &[u8]) -> std::io::Result<()> {
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&(body.len() as u32).to_be_bytes());
    frame.extend_from_slice(body);
    s.write_all(&frame).await
}

async fn read_frame(s: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let len = s.read_u32().await? as usize;
    if len > MAX_FRAME {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, format!("frame of {len} bytes")));
    }
    let mut buf = vec![0u8; len];
    s.read_exact(&mut buf).await?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_znode_layout() {
        let m = proto::MetaRegionServer {
            server: proto::ServerName { host_name: "localhost".into(), port: Some(16020), start_code: Some(1) },
            rpc_version: Some(0),
            state: Some(3),
        };
        let mut data = vec![0xFF, 0, 0, 0, 3, b'a', b'b', b'c'];
        data.extend_from_slice(b"PBUF");
        data.extend_from_slice(&m.encode_to_vec());
        assert_eq!(parse_meta_region_server(&data).unwrap(), "localhost:16020");
        assert!(parse_meta_region_server(&data[..10]).is_err());
        assert!(parse_meta_region_server(b"PBUF").is_err());
    }

    #[test]
    fn parses_the_master_znode() {
        let m = proto::Master {
            master: proto::ServerName { host_name: "m1".into(), port: Some(16000), start_code: Some(7) },
            rpc_version: Some(0),
            info_port: Some(16010),
        };
        let mut data = vec![0xFF, 0, 0, 0, 2, b'i', b'd'];
        data.extend_from_slice(b"PBUF");
        data.extend_from_slice(&m.encode_to_vec());
        assert_eq!(parse_master(&data).unwrap(), "m1:16000");
        // The master's port is field 2 of ServerName inside field 1: check the bytes, not just the round trip.
        assert_eq!(&m.encode_to_vec()[..6], &[0x0a, 0x09, 0x0a, 0x02, b'm', b'1']);
        data.truncate(9);
        assert!(parse_master(&data).is_err());
    }
}
