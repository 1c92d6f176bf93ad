//! Admin calls to the active master (`MasterService`): a table's column family descriptors, and changing one
//! family's attributes — what rtsd needs to turn its retention into HBase TTLs.
//!
//! The master is found as gohbase and asynchbase find it: the `<basedir>/master` znode (or, with
//! [`crate::Config::bootstrap_servers`], `ClientMetaService.GetActiveMaster`). A connection to it is opened per
//! admin operation (they are rare) and replaced when it breaks; every call retries retriable errors (a master
//! starting, `PleaseHoldException`, a failover) until the client's operation deadline.
//!
//! `ModifyColumn` replaces the family's whole descriptor, so a change sends back every attribute and configuration
//! entry the master reported, with only the changed one different. On HBase 2.x it is a procedure: the call
//! answers once the procedure is queued, and the change is waited for by polling the procedure until it finished
//! (or the deadline).
use std::sync::Arc;
use std::time::Duration;

use prost::Message;

use crate::client::{Attempts, Client, Inner};
use crate::conn::Conn;
use crate::error::{Error, Result, Retry};
use crate::proto;

/// The `TTL` attribute's value meaning "keep forever" (HBase's `HConstants.FOREVER`, `Integer.MAX_VALUE`).
pub const FOREVER: u32 = i32::MAX as u32;

/// The family attribute holding the time to live in seconds, as a decimal string.
pub const TTL: &str = "TTL";

/// One column family's descriptor as the master reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FamilyDescriptor {
    pub name: Vec<u8>,
    /// Attributes (`TTL`, `VERSIONS`, `BLOOMFILTER`, `COMPRESSION`, ...), values as HBase writes them (strings).
    pub attributes: Vec<(Vec<u8>, Vec<u8>)>,
    /// Per-family configuration overrides.
    pub configuration: Vec<(String, String)>,
}

impl FamilyDescriptor {
    pub fn attribute(&self, key: &str) -> Option<&[u8]> {
        self.attributes.iter().find(|(k, _)| k == key.as_bytes()).map(|(_, v)| v.as_slice())
    }

    /// The time to live in seconds; `None` for forever (the attribute absent or [`FOREVER`]).
    pub fn ttl(&self) -> Result<Option<u32>> {
        let Some(v) = self.attribute(TTL) else { return Ok(None) };
        let text = std::str::from_utf8(v).unwrap_or_default().trim();
        let secs: i64 = text.parse().map_err(|_| Error::Protocol(format!("TTL attribute {v:?} is not a number")))?;
        Ok((secs < i64::from(FOREVER)).then_some(secs.max(0) as u32))
    }

    /// Sets attribute `key` to `value`, in place if present (keeping the others' order), else at the end.
    pub fn set_attribute(&mut self, key: &str, value: &str) {
        match self.attributes.iter_mut().find(|(k, _)| k == key.as_bytes()) {
            Some((_, v)) => *v = value.as_bytes().to_vec(),
            None => self.attributes.push((key.as_bytes().to_vec(), value.as_bytes().to_vec())),
        }
    }

    fn from_proto(s: proto::ColumnFamilySchema) -> FamilyDescriptor {
        FamilyDescriptor {
            name: s.name,
            attributes: s.attributes.into_iter().map(|p| (p.first, p.second)).collect(),
            configuration: s.configuration.into_iter().map(|p| (p.name, p.value)).collect(),
        }
    }

    fn to_proto(&self) -> proto::ColumnFamilySchema {
        proto::ColumnFamilySchema {
            name: self.name.clone(),
            attributes: self
                .attributes
                .iter()
                .map(|(k, v)| proto::BytesBytesPair { first: k.clone(), second: v.clone() })
                .collect(),
            configuration: self
                .configuration
                .iter()
                .map(|(k, v)| proto::NameStringPair { name: k.clone(), value: v.clone() })
                .collect(),
        }
    }
}

/// `ns:qualifier`, or a table of the `default` namespace.
pub(crate) fn table_name(table: &str) -> proto::TableName {
    let (ns, q) = table.split_once(':').unwrap_or(("default", table));
    proto::TableName { namespace: ns.as_bytes().to_vec(), qualifier: q.as_bytes().to_vec() }
}

/// The master's connection for the length of one admin operation.
struct Master<'a> {
    inner: &'a Inner,
    conn: Option<Arc<Conn>>,
}

impl Master<'_> {
    /// One call to the master, retried until `attempts`' deadline.
    async fn call<Req: Message, Resp: Message + Default>(
        &mut self,
        method: &str,
        req: &Req,
        attempts: &mut Attempts,
    ) -> Result<Resp> {
        loop {
            let timeout = self.inner.rpc_timeout(attempts);
            let res = async {
                let conn = match self.conn.as_ref().filter(|c| !c.is_closed()) {
                    Some(c) => c.clone(),
                    None => {
                        let addr = self.address(timeout).await?;
                        let (user, most) = (&self.inner.cfg.user, self.inner.cfg.max_calls_per_server);
                        let c = Arc::new(Conn::connect(&addr, user, "MasterService", timeout, most).await?);
                        self.conn = Some(c.clone());
                        c
                    }
                };
                conn.call(method, req, timeout).await
            }
            .await;
            match res {
                Ok(resp) => return Ok(resp),
                Err(e) => {
                    if e.retry() == Retry::ServerGone {
                        // Maybe a failover: ask again where the active master is.
                        self.conn = None;
                    }
                    self.inner.pause(e, attempts).await?;
                }
            }
        }
    }

    async fn address(&self, timeout: Duration) -> Result<String> {
        let cfg = &self.inner.cfg;
        if cfg.bootstrap_servers.is_empty() {
            crate::zk::master_server(&cfg.zk_quorum, &cfg.zk_basedir, timeout).await
        } else {
            crate::registry::master_server(&cfg.bootstrap_servers, &cfg.user, timeout).await
        }
    }

    async fn families(&mut self, table: &str, attempts: &mut Attempts) -> Result<Vec<FamilyDescriptor>> {
        let req = proto::GetTableDescriptorsRequest { table_names: vec![table_name(table)], ..Default::default() };
        let resp: proto::GetTableDescriptorsResponse = self.call("GetTableDescriptors", &req, attempts).await?;
        // A missing table is an empty answer, not an exception.
        let schema = resp.table_schema.into_iter().next().ok_or_else(|| Error::TableNotFound(table.to_string()))?;
        Ok(schema.column_families.into_iter().map(FamilyDescriptor::from_proto).collect())
    }

    async fn family(&mut self, table: &str, family: &[u8], attempts: &mut Attempts) -> Result<FamilyDescriptor> {
        self.families(table, attempts).await?.into_iter().find(|f| f.name == family).ok_or_else(|| Error::Remote {
            class: "org.apache.hadoop.hbase.InvalidFamilyOperationException".into(),
            message: format!("table {table} has no family {}", String::from_utf8_lossy(family)),
            do_not_retry: true,
        })
    }
}

impl Client {
    fn master(&self) -> Master<'_> {
        Master { inner: &self.inner, conn: None }
    }

    /// The column families of `table` with their attributes ([`Error::TableNotFound`] if there is no such table).
    pub async fn families(&self, table: &str) -> Result<Vec<FamilyDescriptor>> {
        self.master().families(table, &mut self.inner.attempts()).await
    }

    /// One family's descriptor (an `InvalidFamilyOperationException` error if the table lacks it).
    pub async fn family(&self, table: &str, family: &[u8]) -> Result<FamilyDescriptor> {
        self.master().family(table, family, &mut self.inner.attempts()).await
    }

    /// The family's time to live in seconds; `None` when it keeps cells forever.
    pub async fn family_ttl(&self, table: &str, family: &[u8]) -> Result<Option<u32>> {
        self.family(table, family).await?.ttl()
    }

    /// Sets the family's time to live (`None`: forever), keeping every other attribute and configuration entry
    /// as it is, and waits until the master has applied it (the regions of the table are reopened). True when
    /// the TTL changed, false when it already was `ttl` (then nothing is sent).
    pub async fn set_family_ttl(&self, table: &str, family: &[u8], ttl: Option<u32>) -> Result<bool> {
        let value = match ttl {
            Some(0) => return Err(Error::Invalid("a TTL of 0 seconds (HBase wants at least 1)".into())),
            Some(s) if s >= FOREVER => None,
            other => other,
        };
        let mut attempts = self.inner.attempts();
        let mut master = self.master();
        let mut desc = master.family(table, family, &mut attempts).await?;
        if desc.ttl()? == value {
            return Ok(false);
        }
        desc.set_attribute(TTL, &value.unwrap_or(FOREVER).to_string());
        self.modify(&mut master, table, &desc, &mut attempts).await?;
        let now = master.family(table, family, &mut attempts).await?.ttl()?;
        if now != value {
            return Err(Error::Protocol(format!(
                "ModifyColumn of {table}:{} finished but its TTL reads {now:?}, not {value:?}",
                String::from_utf8_lossy(family)
            )));
        }
        Ok(true)
    }

    /// Replaces the descriptor of the family `desc` names with `desc` and waits until the master has applied it.
    pub async fn modify_family(&self, table: &str, desc: &FamilyDescriptor) -> Result<()> {
        let mut attempts = self.inner.attempts();
        self.modify(&mut self.master(), table, desc, &mut attempts).await
    }

    async fn modify(
        &self,
        master: &mut Master<'_>,
        table: &str,
        desc: &FamilyDescriptor,
        attempts: &mut Attempts,
    ) -> Result<()> {
        // A nonce makes a retry after a lost answer get the procedure already submitted instead of a second one.
        let req = proto::ModifyColumnRequest {
            table_name: table_name(table),
            column_families: desc.to_proto(),
            nonce_group: Some(self.inner.nonces.group()),
            nonce: Some(self.inner.nonces.next()),
        };
        let resp: proto::ModifyColumnResponse = master.call("ModifyColumn", &req, attempts).await?;
        match resp.proc_id {
            Some(id) => wait_procedure(master, id, attempts).await,
            // A 1.x master applies the change before answering.
            None => Ok(()),
        }
    }
}

/// Polls procedure `id` until it finished (its failure as the error) or the deadline passed.
async fn wait_procedure(master: &mut Master<'_>, id: u64, attempts: &mut Attempts) -> Result<()> {
    let mut pause = Duration::from_millis(50);
    let started = tokio::time::Instant::now();
    loop {
        let req = proto::GetProcedureResultRequest { proc_id: id };
        let resp: proto::GetProcedureResultResponse = master.call("getProcedureResult", &req, attempts).await?;
        match proto::ProcedureState::try_from(resp.state) {
            Ok(proto::ProcedureState::Finished) => {
                return match resp.exception {
                    None => Ok(()),
                    Some(ex) => {
                        let generic = ex.generic_exception.unwrap_or_default();
                        Err(Error::Remote {
                            class: generic.class_name.unwrap_or_else(|| "ProcedureFailed".into()),
                            message: generic.message.unwrap_or_default(),
                            do_not_retry: true,
                        })
                    }
                };
            }
            // Finished long enough ago that the master forgot it: the caller reads the result back.
            Ok(proto::ProcedureState::NotFound) => return Ok(()),
            _ => {}
        }
        if tokio::time::Instant::now() + pause >= tokio::time::Instant::from_std(attempts.deadline()) {
            return Err(Error::Deadline {
                elapsed: started.elapsed(),
                last: Box::new(Error::Remote {
                    class: "ProcedureRunning".into(),
                    message: format!("master procedure {id} still running"),
                    do_not_retry: false,
                }),
            });
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn family(attrs: &[(&str, &str)]) -> FamilyDescriptor {
        FamilyDescriptor {
            name: b"t".to_vec(),
            attributes: attrs.iter().map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec())).collect(),
            configuration: vec![("hbase.hstore.blockingStoreFiles".into(), "20".into())],
        }
    }

    #[test]
    fn ttl_reads_forever_as_none() {
        assert_eq!(family(&[]).ttl().unwrap(), None);
        assert_eq!(family(&[("TTL", "2147483647")]).ttl().unwrap(), None);
        assert_eq!(family(&[("TTL", "864000")]).ttl().unwrap(), Some(864000));
        assert!(family(&[("TTL", "ten days")]).ttl().is_err());
    }

    #[test]
    fn setting_ttl_keeps_the_rest_in_place() {
        let mut f = family(&[("BLOOMFILTER", "ROW"), ("TTL", "2147483647"), ("VERSIONS", "1")]);
        f.set_attribute(TTL, "3600");
        assert_eq!(f, family(&[("BLOOMFILTER", "ROW"), ("TTL", "3600"), ("VERSIONS", "1")]));
        let mut g = family(&[("VERSIONS", "1")]);
        g.set_attribute(TTL, "60");
        assert_eq!(g.attribute("TTL"), Some(&b"60"[..]));
        assert_eq!(g.attribute("VERSIONS"), Some(&b"1"[..]));
    }

    #[test]
    fn modify_column_encodes_the_whole_family() {
        let f = family(&[("TTL", "60")]);
        let req = proto::ModifyColumnRequest {
            table_name: table_name("tsdb"),
            column_families: f.to_proto(),
            nonce_group: Some(1),
            nonce: Some(2),
        };
        let bytes = req.encode_to_vec();
        // table_name (1): namespace (1) "default", qualifier (2) "tsdb".
        assert_eq!(&bytes[..17], b"\x0a\x0f\x0a\x07default\x12\x04tsdb");
        // column_families (2): name (1) "t", attributes (2) {first (1) "TTL", second (2) "60"}, configuration (3).
        assert_eq!(&bytes[17..30], b"\x12\x35\x0a\x01t\x12\x09\x0a\x03TTL\x12");
        // nonce_group (3) and nonce (4) as varints at the end.
        assert_eq!(&bytes[bytes.len() - 4..], b"\x18\x01\x20\x02");
        let back = proto::ModifyColumnRequest::decode(bytes.as_slice()).unwrap();
        assert_eq!(FamilyDescriptor::from_proto(back.column_families), f);
        assert_eq!(table_name("ns:x").namespace, b"ns");
    }
}
