//! The client: configuration, connections per region server, region lookup, and the retry loop every call runs in.
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prost::Message;

use crate::conn::Conn;
use crate::error::{Error, Result, Retry};
use crate::meta::{self, RegionCache, RegionLoc};
use crate::ops::{cells, Cell, Mutation, MutationKind, Nonces};
use crate::proto;

/// How the client finds HBase and how long it tries.
#[derive(Debug, Clone)]
pub struct Config {
    /// ZooKeeper quorum, `host:port[,host:port...]` (OpenTSDB's `tsd.storage.hbase.zk_quorum`).
    pub zk_quorum: String,
    /// HBase's parent znode (`tsd.storage.hbase.zk_basedir`), `/hbase` by default.
    pub zk_basedir: String,
    /// HBase servers (`host:port` of masters or, on HBase >= 2.5, region servers) to ask where `hbase:meta` is
    /// instead of ZooKeeper (HBase's `hbase.client.bootstrap.servers`). Empty: ZooKeeper.
    pub bootstrap_servers: Vec<String>,
    /// The user the connections announce (SIMPLE authentication).
    pub user: String,
    /// The overall deadline of one call, retries included.
    pub operation_timeout: Duration,
    /// The longest wait for one RPC's answer (also the server-side time limit sent with it).
    pub rpc_timeout: Duration,
    /// The first pause between retries; doubled per attempt up to `max_backoff`.
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    /// Calls under way at once on the connection to one server; more wait their turn. Below what a region server
    /// queues by default (`hbase.ipc.server.max.callqueue.length`, 10 per handler: 300 with HBase's 30 handlers,
    /// 100 on the test bed's 10), so that one client's burst, e.g. the compare-and-sets of a thousand new UIDs,
    /// waits here rather than being refused with `CallQueueTooBigException` and retried after a pause.
    /// `usize::MAX`: no limit.
    pub max_calls_per_server: usize,
}

impl Config {
    pub fn new(zk_quorum: &str, zk_basedir: &str) -> Config {
        Config {
            zk_quorum: zk_quorum.to_string(),
            zk_basedir: if zk_basedir.is_empty() { "/hbase".into() } else { zk_basedir.to_string() },
            bootstrap_servers: Vec::new(),
            user: std::env::var("USER").unwrap_or_else(|_| "rtsd".into()),
            operation_timeout: Duration::from_secs(60),
            rpc_timeout: Duration::from_secs(20),
            initial_backoff: Duration::from_millis(20),
            max_backoff: Duration::from_secs(2),
            max_calls_per_server: 64,
        }
    }
}

/// A connection to one HBase cluster; cheap to clone (all clones share connections and the region cache).
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub cfg: Config,
    pub regions: RegionCache,
    /// One slot per server address, each with its own lock so a slow connect to one server delays no other.
    conns: Mutex<HashMap<String, ConnSlot>>,
    /// Where `hbase:meta` is, once read from ZooKeeper; cleared when meta moved.
    meta_server: Mutex<Option<String>>,
    pub nonces: Nonces,
    stats: Counters,
    /// Calls and cells sent, by table and kind (see [`Client::op_counts`]).
    pub(crate) ops: Mutex<std::collections::BTreeMap<(String, &'static str), OpCount>>,
}

/// How many operations of one kind on one table the client was asked to do, and how many cells (columns of
/// mutations, rows of Gets and scans) they carried. Counted once per operation, not per attempt.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpCount {
    pub ops: u64,
    pub cells: u64,
}

#[derive(Default)]
struct Counters {
    retries: AtomicU64,
    relocations: AtomicU64,
    server_failures: AtomicU64,
    meta_lookups: AtomicU64,
}

/// What the client has done since it started (monotonic counters, for metrics and tests).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Attempts repeated after a retriable error.
    pub retries: u64,
    /// Cached regions dropped because a server said they are not there (split, move, merge, opening).
    pub relocations: u64,
    /// Servers given up on (connection failed or broke, timed out, stopping).
    pub server_failures: u64,
    /// Reversed scans of `hbase:meta` (region cache misses).
    pub meta_lookups: u64,
}

/// A server's connection, if open; locked while connecting.
type ConnSlot = Arc<tokio::sync::Mutex<Option<Arc<Conn>>>>;

/// A call's deadline and attempt count, for [`Inner::pause`].
pub(crate) struct Attempts {
    started: Instant,
    deadline: Instant,
    n: u32,
}

impl Attempts {
    /// When the call gives up.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }
}

impl Client {
    /// Connects to the cluster whose ZooKeeper is `zk_quorum`: reads where `hbase:meta` is (failing with
    /// [`Error::Unreachable`] when it cannot within the default deadline). Region servers are connected on first
    /// use.
    pub async fn connect(zk_quorum: &str, zk_basedir: &str) -> Result<Client> {
        Client::with_config(Config::new(zk_quorum, zk_basedir)).await
    }

    pub async fn with_config(cfg: Config) -> Result<Client> {
        let client = Client {
            inner: Arc::new(Inner {
                cfg,
                regions: RegionCache::default(),
                conns: Mutex::new(HashMap::new()),
                meta_server: Mutex::new(None),
                nonces: Nonces::new(),
                stats: Counters::default(),
                ops: Mutex::new(Default::default()),
            }),
        };
        let inner = &client.inner;
        let mut attempts = inner.attempts();
        loop {
            match inner.meta_server().await {
                Ok(_) => return Ok(client),
                Err(e) => inner.pause(e, &mut attempts).await?,
            }
        }
    }

    pub fn config(&self) -> &Config {
        &self.inner.cfg
    }

    /// The cells of `row`: all of `family` when `qualifiers` is empty, all families when `family` is `None`.
    /// An absent row is an empty vector.
    pub async fn get(&self, table: &str, row: &[u8], family: Option<&[u8]>, qualifiers: &[&[u8]]) -> Result<Vec<Cell>> {
        self.inner.count(table, "get", 1);
        let get = proto::Get { row: row.to_vec(), column: columns(family, qualifiers), ..Default::default() };
        let resp: proto::GetResponse = self
            .inner
            .region_call(table, row, "Get", |loc| proto::GetRequest {
                region: proto::RegionSpecifier::name(&loc.name),
                get: get.clone(),
            })
            .await?;
        Ok(cells(resp.result))
    }

    /// Applies one mutation; answers the new cells of an Append or Increment (empty for Put and Delete). Returns
    /// only once HBase acknowledged it: any error means it may or may not have been applied.
    pub async fn mutate(&self, m: &Mutation) -> Result<Vec<Cell>> {
        m.validate()?;
        self.inner.count(&m.table, m.kind.name(), m.columns.len().max(1) as u64);
        let nonce = self.inner.nonces.for_mutation(m);
        let mutation = m.to_proto(nonce);
        let nonce_group = nonce.map(|_| self.inner.nonces.group());
        let resp: proto::MutateResponse = self
            .inner
            .region_call(&m.table, &m.row, "Mutate", |loc| proto::MutateRequest {
                region: proto::RegionSpecifier::name(&loc.name),
                mutation: mutation.clone(),
                condition: None,
                nonce_group,
            })
            .await?;
        Ok(cells(resp.result))
    }

    pub async fn put(&self, table: &str, row: &[u8], family: &[u8], columns: Vec<(Vec<u8>, Vec<u8>)>) -> Result<()> {
        self.mutate(&Mutation::put(table, row, family, columns)).await.map(|_| ())
    }

    /// Appends to each column; the columns' new values.
    pub async fn append(
        &self,
        table: &str,
        row: &[u8],
        family: &[u8],
        columns: Vec<(Vec<u8>, Vec<u8>)>,
    ) -> Result<Vec<Cell>> {
        self.mutate(&Mutation::append(table, row, family, columns)).await
    }

    /// Adds `amount` to the 8-byte counter in the column (absent counts as 0); the new value.
    pub async fn increment(
        &self,
        table: &str,
        row: &[u8],
        family: &[u8],
        qualifier: &[u8],
        amount: i64,
    ) -> Result<i64> {
        let got = self.mutate(&Mutation::increment(table, row, family, qualifier, amount)).await?;
        let cell = got
            .iter()
            .find(|c| c.qualifier == qualifier)
            .ok_or_else(|| Error::Protocol("increment answered no cell".into()))?;
        let bytes: [u8; 8] =
            cell.value.as_slice().try_into().map_err(|_| Error::Protocol("counter is not 8 bytes".into()))?;
        Ok(i64::from_be_bytes(bytes))
    }

    /// Deletes `qualifiers` of `family` (every version); no qualifiers: the whole family.
    pub async fn delete(&self, table: &str, row: &[u8], family: &[u8], qualifiers: &[&[u8]]) -> Result<()> {
        self.mutate(&Mutation::delete(table, row, family, qualifiers)).await.map(|_| ())
    }

    /// Applies the Put `put` only if the cell (`put`'s row, `family`, `qualifier`) holds `expected` — an empty
    /// `expected` meaning the cell is absent, as OpenTSDB's UID assignment relies on. True when applied.
    ///
    /// A retry after a lost answer can see its own write and answer false: callers (like OpenTSDB's) re-read on
    /// false.
    pub async fn check_and_put(
        &self,
        put: &Mutation,
        family: &[u8],
        qualifier: &[u8],
        expected: &[u8],
    ) -> Result<bool> {
        put.validate()?;
        if put.kind != MutationKind::Put {
            return Err(Error::Invalid("check_and_put takes a Put".into()));
        }
        self.inner.count(&put.table, "check_and_put", put.columns.len() as u64);
        let comparator =
            proto::BinaryComparator { comparable: proto::ByteArrayComparable { value: Some(expected.to_vec()) } };
        let condition = proto::Condition {
            row: put.row.clone(),
            family: Some(family.to_vec()),
            qualifier: Some(qualifier.to_vec()),
            compare_type: Some(proto::CompareType::Equal as i32),
            comparator: Some(proto::Comparator {
                name: "org.apache.hadoop.hbase.filter.BinaryComparator".into(),
                serialized_comparator: Some(comparator.encode_to_vec()),
            }),
        };
        let mutation = put.to_proto(None);
        let resp: proto::MutateResponse = self
            .inner
            .region_call(&put.table, &put.row, "Mutate", |loc| proto::MutateRequest {
                region: proto::RegionSpecifier::name(&loc.name),
                mutation: mutation.clone(),
                condition: Some(condition.clone()),
                nonce_group: None,
            })
            .await?;
        Ok(resp.processed.unwrap_or(false))
    }

    pub fn stats(&self) -> Stats {
        let s = &self.inner.stats;
        Stats {
            retries: s.retries.load(Ordering::Relaxed),
            relocations: s.relocations.load(Ordering::Relaxed),
            server_failures: s.server_failures.load(Ordering::Relaxed),
            meta_lookups: s.meta_lookups.load(Ordering::Relaxed),
        }
    }

    /// Operations asked of the client since it started, by (table, kind), kinds being `get`, `put`, `append`,
    /// `increment`, `delete`, `delete_version` and `check_and_put` for single-row calls, the same prefixed with
    /// `multi_` for actions sent in Multis (`multi_get` for [`Client::get_many`]'s rows), `multi` for the Multi
    /// RPCs themselves (one per region server per round) and `scan` for scan RPCs (`cells`: rows answered).
    pub fn op_counts(&self) -> Vec<((String, &'static str), OpCount)> {
        self.inner.ops.lock().unwrap().iter().map(|(k, v)| (k.clone(), *v)).collect()
    }

    /// `host:port` of the region server holding `hbase:meta` (as last read from ZooKeeper).
    pub async fn meta_location(&self) -> Result<String> {
        self.inner.meta_server().await
    }

    /// The region of `table` holding `row` (from the cache, or `hbase:meta`).
    pub async fn locate(&self, table: &str, row: &[u8]) -> Result<RegionLoc> {
        let mut attempts = self.inner.attempts();
        loop {
            match self.inner.locate(table, row).await {
                Ok(loc) => return Ok((*loc).clone()),
                Err(e) => self.inner.pause(e, &mut attempts).await?,
            }
        }
    }
}

/// A Get's columns: all of `family` when `qualifiers` is empty, every family when `family` is `None`.
pub(crate) fn columns(family: Option<&[u8]>, qualifiers: &[&[u8]]) -> Vec<proto::Column> {
    family
        .map(|f| proto::Column { family: f.to_vec(), qualifier: qualifiers.iter().map(|q| q.to_vec()).collect() })
        .into_iter()
        .collect()
}

impl Inner {
    /// Counts one operation of `kind` on `table` carrying `cells` (see [`Client::op_counts`]).
    pub(crate) fn count(&self, table: &str, kind: &'static str, cells: u64) {
        let mut ops = self.ops.lock().unwrap();
        let c = match ops.get_mut(&(table.to_string(), kind)) {
            Some(c) => c,
            None => ops.entry((table.to_string(), kind)).or_default(),
        };
        c.ops += 1;
        c.cells += cells;
    }

    pub fn attempts(&self) -> Attempts {
        let now = Instant::now();
        Attempts { started: now, deadline: now + self.cfg.operation_timeout, n: 0 }
    }

    /// After a failed attempt: `Err` when the error is final or the deadline has come, else a pause (exponential,
    /// capped) before the next attempt.
    pub async fn pause(&self, e: Error, a: &mut Attempts) -> Result<()> {
        if e.retry() == Retry::Never {
            return Err(e);
        }
        let backoff = self.cfg.initial_backoff.saturating_mul(1 << a.n.min(16)).min(self.cfg.max_backoff);
        let now = Instant::now();
        if now + backoff >= a.deadline {
            let elapsed = now - a.started;
            tracing::debug!(?elapsed, error = %e, "hbase call gave up");
            if matches!(e, Error::Connection { .. } | Error::ZooKeeper(_)) {
                return Err(Error::Unreachable(format!("after {elapsed:?}: {e}")));
            }
            return Err(Error::Deadline { elapsed, last: Box::new(e) });
        }
        tracing::debug!(attempt = a.n, ?backoff, error = %e, "hbase call retrying");
        a.n += 1;
        self.stats.retries.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep(backoff).await;
        Ok(())
    }

    /// The timeout of the next RPC: the configured one, cut to what is left of the deadline.
    pub fn rpc_timeout(&self, a: &Attempts) -> Duration {
        let left = a.deadline.saturating_duration_since(Instant::now());
        self.cfg.rpc_timeout.min(left).max(Duration::from_millis(10))
    }

    /// The connection to `addr`, opened if there is none or the last one broke.
    pub async fn conn(&self, addr: &str, timeout: Duration) -> Result<Arc<Conn>> {
        let slot = self.conns.lock().unwrap().entry(addr.to_string()).or_default().clone();
        let mut slot = slot.lock().await;
        if let Some(c) = slot.as_ref().filter(|c| !c.is_closed()) {
            return Ok(c.clone());
        }
        let c = Arc::new(
            Conn::connect(addr, &self.cfg.user, "ClientService", timeout, self.cfg.max_calls_per_server).await?,
        );
        *slot = Some(c.clone());
        Ok(c)
    }

    /// What an error of a call to `loc` says about the caches.
    pub fn forget(&self, loc: &RegionLoc, e: &Error) {
        match e.retry() {
            Retry::Relocate => {
                self.stats.relocations.fetch_add(1, Ordering::Relaxed);
                self.regions.invalidate(loc);
                if loc.is_meta() {
                    self.meta_server.lock().unwrap().take();
                }
            }
            Retry::ServerGone => {
                self.stats.server_failures.fetch_add(1, Ordering::Relaxed);
                if let Some(slot) = self.conns.lock().unwrap().get(&loc.server) {
                    // The slot is locked only while connecting; then the next call reconnects anyway.
                    if let Ok(mut s) = slot.try_lock() {
                        s.take();
                    }
                }
                self.regions.invalidate_server(&loc.server);
                let mut meta = self.meta_server.lock().unwrap();
                if meta.as_deref() == Some(loc.server.as_str()) {
                    meta.take();
                }
            }
            _ => {}
        }
    }

    async fn meta_server(&self) -> Result<String> {
        if let Some(s) = self.meta_server.lock().unwrap().clone() {
            return Ok(s);
        }
        let cfg = &self.cfg;
        let s = if cfg.bootstrap_servers.is_empty() {
            crate::zk::meta_server(&cfg.zk_quorum, &cfg.zk_basedir, cfg.rpc_timeout).await?
        } else {
            crate::registry::meta_server(&cfg.bootstrap_servers, &cfg.user, cfg.rpc_timeout).await?
        };
        *self.meta_server.lock().unwrap() = Some(s.clone());
        Ok(s)
    }

    /// One attempt at finding the region of `table` holding `key`: the cache, else one reversed scan of meta.
    pub async fn locate(&self, table: &str, key: &[u8]) -> Result<Arc<RegionLoc>> {
        if let Some(loc) = self.regions.get(table, key) {
            return Ok(loc);
        }
        let server = self.meta_server().await?;
        self.stats.meta_lookups.fetch_add(1, Ordering::Relaxed);
        let meta = RegionLoc {
            table: "hbase:meta".into(),
            name: meta::META_REGION.to_vec(),
            start: Vec::new(),
            end: Vec::new(),
            server,
        };
        let req = proto::ScanRequest {
            region: Some(proto::RegionSpecifier::name(meta::META_REGION)),
            scan: Some(proto::Scan {
                column: vec![proto::Column { family: meta::META_FAMILY.to_vec(), qualifier: Vec::new() }],
                start_row: Some(meta::meta_search_key(table, key)),
                // No stop row: meta's comparator orders `<table>,` after the table's first row `<table>,,<id>`
                // (measured on 2.6: that stop row hid the first region), and one row is asked for anyway;
                // `parse_meta_row` rejects a row of another table.
                reversed: Some(true),
                caching: Some(1),
                ..Default::default()
            }),
            number_of_rows: Some(1),
            close_scanner: Some(true),
            ..Default::default()
        };
        let timeout = self.cfg.rpc_timeout;
        let resp: Result<proto::ScanResponse> = async {
            let conn = self.conn(&meta.server, timeout).await?;
            conn.call("Scan", &req, timeout).await
        }
        .await;
        let resp = resp.inspect_err(|e| self.forget(&meta, e))?;
        let Some(row) = resp.results.into_iter().next() else {
            return Err(Error::TableNotFound(table.to_string()));
        };
        let loc = Arc::new(meta::parse_meta_row(table, key, &row.cell)?);
        self.regions.insert(loc.clone());
        Ok(loc)
    }

    /// Runs `method` against the region holding `row`, retrying per the error table until the deadline.
    pub async fn region_call<Req: Message, Resp: Message + Default>(
        &self,
        table: &str,
        row: &[u8],
        method: &str,
        build: impl Fn(&RegionLoc) -> Req,
    ) -> Result<Resp> {
        let mut attempts = self.attempts();
        loop {
            let timeout = self.rpc_timeout(&attempts);
            let loc = match self.locate(table, row).await {
                Ok(loc) => loc,
                Err(e) => {
                    self.pause(e, &mut attempts).await?;
                    continue;
                }
            };
            let res = async {
                let conn = self.conn(&loc.server, timeout).await?;
                conn.call(method, &build(&loc), timeout).await
            }
            .await;
            match res {
                Ok(resp) => return Ok(resp),
                Err(e) => {
                    self.forget(&loc, &e);
                    self.pause(e, &mut attempts).await?;
                }
            }
        }
    }
}
