//! Where `hbase:meta` is, asked of any HBase server instead of ZooKeeper: `ClientMetaService`'s
//! `GetMetaRegionLocations`, served by masters and (since 2.5) region servers — what HBase's own
//! `RpcConnectionRegistry` uses with `hbase.client.bootstrap.servers`. Lets a client run where ZooKeeper is not
//! reachable.
use std::time::Duration;

use crate::conn::Conn;
use crate::error::{Error, Result};
use crate::proto;

/// `host:port` of the server holding `hbase:meta` (its primary replica), from the first bootstrap server that
/// answers.
pub async fn meta_server(bootstrap: &[String], user: &str, timeout: Duration) -> Result<String> {
    let mut last = Error::Invalid("no bootstrap server configured".into());
    for addr in bootstrap {
        match ask(addr, user, timeout).await {
            Ok(s) => return Ok(s),
            Err(e) => last = e,
        }
    }
    Err(last)
}

async fn ask(addr: &str, user: &str, timeout: Duration) -> Result<String> {
    let conn = Conn::connect(addr, user, "ClientMetaService", timeout, 1).await?;
    let resp: proto::GetMetaRegionLocationsResponse =
        conn.call("GetMetaRegionLocations", &proto::GetMetaRegionLocationsRequest {}, timeout).await?;
    let primary = resp
        .meta_locations
        .iter()
        .filter(|l| l.region_info.as_ref().is_some_and(|r| r.replica_id.unwrap_or(0) == 0))
        .find_map(|l| l.server_name.as_ref());
    match primary {
        Some(s) => Ok(format!("{}:{}", s.host_name, s.port.unwrap_or(16020))),
        // Meta not assigned yet (a starting cluster): retriable.
        None => Err(Error::RegionNotOnline(format!("hbase:meta (according to {addr})"))),
    }
}

/// `host:port` of the active master, from the first bootstrap server that knows it (`GetActiveMaster`).
pub async fn master_server(bootstrap: &[String], user: &str, timeout: Duration) -> Result<String> {
    let mut last = Error::Invalid("no bootstrap server configured".into());
    for addr in bootstrap {
        let asked = async {
            let conn = Conn::connect(addr, user, "ClientMetaService", timeout, 1).await?;
            let resp: proto::GetActiveMasterResponse =
                conn.call("GetActiveMaster", &proto::GetActiveMasterRequest {}, timeout).await?;
            match resp.server_name {
                Some(s) => Ok(format!("{}:{}", s.host_name, s.port.unwrap_or(16000))),
                // No active master right now (a failover): retriable.
                None => Err(Error::Remote {
                    class: "PleaseHoldException".into(),
                    message: format!("no active master according to {addr}"),
                    do_not_retry: false,
                }),
            }
        };
        match asked.await {
            Ok(s) => return Ok(s),
            Err(e) => last = e,
        }
    }
    Err(last)
}
