//! The HBase engine: the store's tables as OpenTSDB's own HBase tables, through rtsd's native client
//! (`rtsd-hbase`, no JVM). Each store table `<table>:<family>` is the HBase table `<table>` (renamed by
//! [`HBaseTables`], OpenTSDB's `tsd.storage.hbase.*_table`) and its family `<family>`; its keys and values become
//! cells by the table's [`CellMap`]:
//! * [`CellMap::RowColumns`] (`tsdb`, rollup tables): a row's columns are its cells. A merge is a put of the
//!   operand's columns (what OpenTSDB writes: one cell per point, later wins); a read gives the row's cells as
//!   columns, run through the table's merge (OpenTSDB's compaction on read), so the store sees what RocksDB's
//!   merge operator would have made.
//! * [`CellMap::QualifierRow`] (`tsdb-uid`, `tsdb-meta`): the key `qualifier 0x00 row` is the cell `(row,
//!   qualifier)`; increments and compare-and-sets are HBase's own, so UIDs are assigned exactly as OpenTSDB's
//!   TSDs assign them, and concurrently with them.
//! * [`CellMap::Plain`] (rtsd's own tables, in the HBase table `rtsd`): the key is the row, the value the cell
//!   with the empty qualifier. A merge there is read-modify-write by compare-and-set, retried until it applies,
//!   unless the table declares its merge's [`Parts`] (the series index, the rollup marks): then each merge is
//!   blind mutations in the batch's Multi, one cell per part beside the empty-qualifier one (see [`part_writes`]),
//!   and a read joins the cells with the merge (see [`value_of`]).
//!
//! The store's code is synchronous; the client is async. The engine owns a small runtime and each call blocks
//! its caller until the runtime answers (as a RocksDB call blocks on disk). What HBase cannot do the way RocksDB
//! does is said where it matters: a batch is one Multi per region server, applied row by row (HBase has no
//! atomic multi-row write; a failure leaves the rows before it written, and the store's retry rewrites them as the
//! same cells), and cursors only go forward.
use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use rtsd_hbase::{Cell, Client, Mutation, ScanRequest};
use rtsd_protocol::codec;

use super::{
    CellMap, CheckAndPut, Combine, Cursor, Durability, Engine, EngineError, EngineErrorKind, Merge, MergeContext, Op,
    Parts, ReadHints, RowVisitor, TableSpec, WriteBatch,
};
use crate::store::StoreError;

mod cells;
mod cursor;
mod write;
use cells::*;
use cursor::*;
use write::*;

/// HBase table names of OpenTSDB's tables (`tsd.storage.hbase.data_table`, `uid_table`, `meta_table`), and of
/// rtsd's own.
#[derive(Debug, Clone)]
pub struct HBaseTables {
    pub data: String,
    pub uid: String,
    pub meta: String,
    /// rtsd's own tables (the series index, rollup marks, settings, Chukwa stream state), one family each.
    pub rtsd: String,
    /// `rtsd.storage.hbase.namespace`: the HBase namespace of every table whose configured name does not name one
    /// (`ns:table`), so that several fleets (staging beside production, or test runs) share one cluster without
    /// sharing a table. Empty: HBase's `default` namespace, where OpenTSDB's tables are.
    pub namespace: String,
}

impl Default for HBaseTables {
    fn default() -> Self {
        HBaseTables {
            data: "tsdb".into(),
            uid: "tsdb-uid".into(),
            meta: "tsdb-meta".into(),
            rtsd: "rtsd".into(),
            namespace: String::new(),
        }
    }
}

/// Where the cluster is and how OpenTSDB's tables are written there (`tsd.storage.hbase.*`,
/// `tsd.storage.enable_appends`).
#[derive(Debug, Clone)]
pub struct HBaseOptions {
    /// `tsd.storage.hbase.zk_quorum`: `host[:port],...`.
    pub zk_quorum: String,
    /// `tsd.storage.hbase.zk_basedir`: HBase's znode.
    pub zk_basedir: String,
    pub tables: HBaseTables,
    /// `tsd.storage.enable_appends`: points go into a row's append column (qualifier `0x050000`) as OpenTSDB's
    /// appends do, instead of one cell per point.
    pub appends: bool,
    /// `hbase.client.operation.timeout`: how long one call (retries included) may take before it fails, so a
    /// write or a read fails with an error instead of waiting for HBase to come back.
    pub operation_timeout: std::time::Duration,
    /// `hbase.rpc.timeout`: the longest wait for one RPC's answer within that.
    pub rpc_timeout: std::time::Duration,
    /// `hbase.region_client.inflight_limit` (asynchbase's name): calls under way at once to one region server;
    /// the others wait their turn (`rtsd_hbase::Config::max_calls_per_server`).
    pub calls_per_server: usize,
    /// How the node holds what it acknowledged until its rows are written (`rtsd.storage.hbase.flush_ms`,
    /// `log_lease_ms`; see `store::shared_log`).
    pub log: crate::store::shared_log::LogOptions,
}

impl HBaseOptions {
    /// The default tables and timeouts (those of `rtsd_hbase::Config::new`) for the cluster at `zk_quorum`.
    pub fn new(zk_quorum: &str) -> HBaseOptions {
        let defaults = rtsd_hbase::Config::new(zk_quorum, "/hbase");
        HBaseOptions {
            zk_quorum: zk_quorum.to_string(),
            zk_basedir: "/hbase".into(),
            tables: HBaseTables::default(),
            appends: false,
            operation_timeout: defaults.operation_timeout,
            rpc_timeout: defaults.rpc_timeout,
            calls_per_server: defaults.max_calls_per_server,
            log: Default::default(),
        }
    }
}

/// One store table as HBase cells.
#[derive(Clone)]
struct Table {
    hbase: String,
    family: Vec<u8>,
    cells: CellMap,
    merge: Option<Merge>,
    /// Merges go into the append column (the data table with `tsd.storage.enable_appends`).
    appends: bool,
    /// How the table's merges split into blind mutations (a [`CellMap::Plain`] table with a merge only).
    parts: Option<Parts>,
    /// Each merge is a cell of its own (see [`TableSpec::blind_operands`] and [`operand_qualifier`]); a plain
    /// table with a merge only, and no parts but sums.
    operands: bool,
    /// Rows a cursor asks for per RPC (and holds ahead of its reader).
    scan_caching: u32,
}

pub struct HBaseEngine {
    runtime: Option<tokio::runtime::Runtime>,
    client: Arc<Client>,
    tables: HashMap<String, Table>,
    names: HBaseTables,
}

/// A key and its value, as a cursor yields them.
type Entry = (Vec<u8>, Vec<u8>);

/// A key's position in a `get_many` call, and its HBase row.
type IndexedRow = (usize, Vec<u8>);

/// How many compare-and-set rounds a merge into a [`CellMap::Plain`] table tries before giving up.
const MERGE_ROUNDS: usize = 64;

/// Rows a cursor asks for per RPC.
const SCAN_CACHING: u32 = 512;
/// The same for a table of large values ([`super::Tuning::Log`]: records of up to a few MB), so a scan holds a
/// few of them at a time, not hundreds.
const SCAN_CACHING_LARGE: u32 = 4;

impl HBaseEngine {
    /// Connects to the cluster whose ZooKeeper quorum and base znode are given (`tsd.storage.hbase.zk_quorum`,
    /// `zk_basedir`) and declares the store's tables.
    pub fn connect(options: &HBaseOptions, tables: &[TableSpec]) -> Result<HBaseEngine, StoreError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("rtsd-hbase")
            .enable_all()
            .build()
            .map_err(|e| StoreError::Io { context: "starting the HBase client", source: e })?;
        let mut config = rtsd_hbase::Config::new(&options.zk_quorum, &options.zk_basedir);
        config.operation_timeout = options.operation_timeout;
        config.rpc_timeout = options.rpc_timeout.min(options.operation_timeout);
        config.max_calls_per_server = options.calls_per_server;
        let client = block(&runtime, async move { Client::with_config(config).await }).map_err(hbase_error)?;
        let tables = tables.iter().map(|spec| (spec.name.clone(), table_of(spec, options))).collect();
        Ok(HBaseEngine { runtime: Some(runtime), client: Arc::new(client), tables, names: options.tables.clone() })
    }

    fn table(&self, name: &str) -> Result<&Table, StoreError> {
        self.tables.get(name).ok_or_else(|| StoreError::Corrupt(format!("no table {name}")))
    }

    /// Runs `f` on the engine's runtime and waits for it (callable from any thread, a runtime's too).
    fn run<T: Send + 'static>(&self, f: impl Future<Output = T> + Send + 'static) -> T {
        block(self.runtime.as_ref().expect("runtime lives as long as the engine"), f)
    }

    /// Runs `calls` on the engine's runtime, at most `in_flight` at once, and gives back their outputs in call
    /// order once all are done. `what` names a call in a panic's message.
    fn run_at_most<T, F>(&self, in_flight: usize, calls: Vec<F>, what: &'static str) -> Vec<T>
    where
        T: Send + 'static,
        F: Future<Output = T> + Send + 'static,
    {
        // A batch with nothing of the kind (most of them) costs no trip through the runtime.
        if calls.is_empty() {
            return Vec::new();
        }
        let outputs = self.run(async move {
            let mut outputs: Vec<Option<T>> = std::iter::repeat_with(|| None).take(calls.len()).collect();
            let mut left = calls.into_iter().enumerate();
            let mut running = tokio::task::JoinSet::new();
            loop {
                while running.len() < in_flight {
                    let Some((i, call)) = left.next() else { break };
                    running.spawn(async move { (i, call.await) });
                }
                match running.join_next().await {
                    Some(Ok((i, output))) => outputs[i] = Some(output),
                    Some(Err(e)) => return Err(e),
                    None => return Ok(outputs),
                }
            }
        });
        let outputs = outputs.unwrap_or_else(|e| panic!("a {what} task panicked: {e}"));
        outputs.into_iter().map(|o| o.expect("every call answered")).collect()
    }

    /// The cells of one row of `table`'s family.
    fn row_cells(&self, table: &Table, row: &[u8], qualifier: Option<&[u8]>) -> Result<Vec<Cell>, StoreError> {
        let (client, name, family, row) =
            (self.client.clone(), table.hbase.clone(), table.family.clone(), row.to_vec());
        let qualifier = qualifier.map(<[u8]>::to_vec);
        self.run(async move {
            let qualifiers: Vec<&[u8]> = qualifier.iter().map(Vec::as_slice).collect();
            client.get(&name, &row, Some(family.as_slice()), &qualifiers).await
        })
        .map_err(hbase_error)
    }
}

/// What [`HBaseEngine::ensure_ttl`] found or did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TtlOutcome {
    /// The family already expires cells as asked (or keeps them forever, as asked).
    Unchanged,
    /// The family's TTL was changed; `was` is the previous one (`None`: forever).
    Set { was: Option<u32> },
    /// The table keeps its rows forever, but the family has a TTL (set by hand): left as it is.
    LeftAsSet(u32),
    /// The store has no such table here, or no HBase family can hold the retention: nothing done.
    Skipped,
}

impl HBaseEngine {
    /// Makes the HBase family of store table `table` (`<table>:<family>`, named as [`HBaseTables`] maps it) expire
    /// cells after `seconds`, the table's retention (`None`: forever, then an existing TTL is left as it is and
    /// reported). Blocks until the master has applied a change.
    pub fn ensure_ttl(&self, table: &str, seconds: Option<u64>) -> Result<TtlOutcome, StoreError> {
        let ((name, family), client) = (self.hbase_family(table), self.client.clone());
        self.run(async move { ensure_ttl(&client, &name, &family, seconds).await }).map_err(hbase_error)
    }

    /// The HBase TTL (seconds; `None`: forever) of store table `table`'s family, declared or not (tools, tests).
    pub fn family_ttl(&self, table: &str) -> Result<Option<u32>, StoreError> {
        let ((name, family), client) = (self.hbase_family(table), self.client.clone());
        self.run(async move { client.family_ttl(&name, &family).await }).map_err(hbase_error)
    }

    /// Sets the HBase TTL of store table `table`'s family (`None`: forever), whatever its retention (tools, tests).
    pub fn set_family_ttl(&self, table: &str, seconds: Option<u32>) -> Result<bool, StoreError> {
        let ((name, family), client) = (self.hbase_family(table), self.client.clone());
        self.run(async move { client.set_family_ttl(&name, &family, seconds).await }).map_err(hbase_error)
    }

    /// The HBase table and family of store table `<table>:<family>`.
    fn hbase_family(&self, table: &str) -> (String, Vec<u8>) {
        match self.tables.get(table) {
            Some(t) => (t.hbase.clone(), t.family.clone()),
            None => {
                let (t, family) = split_store_name(table);
                (hbase_table_name(t, &self.names), family.as_bytes().to_vec())
            }
        }
    }

    /// [`HBaseEngine::ensure_ttl`] for every `(table, seconds)`, one after the other in the background (each
    /// change reopens the table's regions, and a master that is down must not hold up the daemon's start); each
    /// outcome is logged, a failure as a warning naming the `alter` to run by hand.
    pub fn ensure_ttls(&self, wanted: Vec<(String, Option<u64>)>) -> tokio::task::JoinHandle<()> {
        let targets: Vec<_> = wanted
            .into_iter()
            .filter_map(|(name, secs)| self.tables.get(&name).map(|t| (t.hbase.clone(), t.family.clone(), secs)))
            .collect();
        let client = self.client.clone();
        let runtime = self.runtime.as_ref().expect("runtime lives as long as the engine");
        runtime.spawn(async move {
            for (table, family, seconds) in targets {
                let fam = String::from_utf8_lossy(&family).into_owned();
                match (ensure_ttl(&client, &table, &family, seconds).await, seconds) {
                    (Ok(TtlOutcome::Set { was }), Some(s)) => tracing::info!(
                        "HBase family {table}:{fam} now expires cells after {s} s (its retention; was {})",
                        was.map_or("forever".to_string(), |w| format!("{w} s"))
                    ),
                    (Ok(TtlOutcome::LeftAsSet(ttl)), _) => tracing::warn!(
                        "HBase family {table}:{fam} has a TTL of {ttl} s though rtsd keeps its rows forever \
                         (retention 0): left as it is, so HBase still expires its cells; to keep them, run \
                         alter '{table}', {{NAME => '{fam}', TTL => 2147483647}}"
                    ),
                    (Ok(outcome), _) => tracing::debug!(?outcome, "HBase TTL of {table}:{fam}"),
                    (Err(e), Some(s)) if s < u64::from(rtsd_hbase::admin::FOREVER) => tracing::warn!(
                        "could not set the TTL of HBase family {table}:{fam} to {s} s (its retention): {e}; \
                         reads still stop at the retention, but HBase keeps the cells until it is set by hand: \
                         alter '{table}', {{NAME => '{fam}', TTL => {s}}}"
                    ),
                    (Err(e), _) => tracing::debug!(error = %e, "could not read the HBase TTL of {table}:{fam}"),
                }
            }
        })
    }
}

/// See [`HBaseEngine::ensure_ttl`].
async fn ensure_ttl(
    client: &Client,
    table: &str,
    family: &[u8],
    seconds: Option<u64>,
) -> Result<TtlOutcome, rtsd_hbase::Error> {
    let current = client.family_ttl(table, family).await?;
    match seconds {
        // HBase's TTL is a 32-bit count of seconds: a longer retention is "forever" there.
        Some(s) if s >= u64::from(rtsd_hbase::admin::FOREVER) => Ok(TtlOutcome::Skipped),
        Some(s) => {
            let s = s.max(1) as u32;
            if current == Some(s) {
                return Ok(TtlOutcome::Unchanged);
            }
            client.set_family_ttl(table, family, Some(s)).await?;
            Ok(TtlOutcome::Set { was: current })
        }
        None => Ok(current.map_or(TtlOutcome::Unchanged, TtlOutcome::LeftAsSet)),
    }
}

impl Drop for HBaseEngine {
    fn drop(&mut self) {
        // Dropping a runtime blocks, which a runtime thread may not do; shutting it down in the background may.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// `name` as a `&'static str`, leaked once per distinct name (a stat's tag; there are a few dozen tables and kinds).
fn intern(name: &str) -> &'static str {
    static NAMES: std::sync::Mutex<std::collections::BTreeSet<&'static str>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(n) = names.get(name) {
        return n;
    }
    let n: &'static str = Box::leak(name.to_string().into_boxed_str());
    names.insert(n);
    n
}

fn block<T: Send + 'static>(runtime: &tokio::runtime::Runtime, f: impl Future<Output = T> + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    runtime.spawn(async move {
        let _ = tx.send(f.await);
    });
    rx.recv().expect("the HBase engine's runtime dropped a call")
}

/// Polls `f` to completion on this thread, parking between wake-ups: a cursor's reader may be any thread, a
/// runtime's own included, where tokio's `blocking_recv` would panic.
///
/// `f` runs unconstrained by tokio's cooperative budget. On a runtime's thread (the daemon opening the store in
/// its `block_on`) the budget belongs to the task this call blocks, which never yields to reset it: once a cursor
/// had received 128 entries, every `recv` answered "pending" and woke itself at once, and the open spun forever.
fn park_on<F: Future>(f: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = std::task::Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = std::task::Context::from_waker(&waker);
    let mut f = std::pin::pin!(tokio::task::unconstrained(f));
    loop {
        if let std::task::Poll::Ready(out) = f.as_mut().poll(&mut cx) {
            return out;
        }
        std::thread::park();
    }
}

/// A store table name `<table>:<family>` split into its table and family. The family is after the *last* `:`:
/// HBase forbids `:` in a family name, while a table name may carry a namespace (`ns:tsdb-rollup-1h:t`).
fn split_store_name(name: &str) -> (&str, &str) {
    name.rsplit_once(':').unwrap_or((name, ""))
}

/// The HBase table of the store's `table` (a store table name without its family), in the configured namespace
/// unless its name has one.
fn hbase_table_name(table: &str, names: &HBaseTables) -> String {
    let name = match table {
        "tsdb" => &names.data,
        "tsdb-uid" => &names.uid,
        "tsdb-meta" => &names.meta,
        "rtsd" => &names.rtsd,
        other => other,
    };
    if names.namespace.is_empty() || name.contains(':') {
        name.to_string()
    } else {
        format!("{}:{name}", names.namespace)
    }
}

fn table_of(spec: &TableSpec, options: &HBaseOptions) -> Table {
    let (table, family) = split_store_name(&spec.name);
    let hbase = hbase_table_name(table, &options.tables);
    let appends = options.appends && spec.name == crate::store::CF_DATA;
    // Parts are joined by the merge, and only a plain table's cell can carry them beside its own.
    let parts = spec.parts.filter(|_| spec.cells == CellMap::Plain && spec.merge.is_some());
    // Operand cells are written in place of sum parts (which are then read still, as rows written before), never
    // beside max or min parts, whose versions a family delete does not reach.
    let operands = spec.blind_operands
        && spec.cells == CellMap::Plain
        && spec.merge.is_some()
        && parts.is_none_or(|p| p.parts.iter().all(|(_, c)| *c == Combine::Sum));
    Table {
        hbase,
        family: family.as_bytes().to_vec(),
        cells: spec.cells,
        merge: spec.merge.clone(),
        appends,
        parts,
        operands,
        scan_caching: if spec.tuning == super::Tuning::Log { SCAN_CACHING_LARGE } else { SCAN_CACHING },
    }
}

fn hbase_error(e: rtsd_hbase::Error) -> StoreError {
    let kind = match e {
        rtsd_hbase::Error::Unreachable(_) | rtsd_hbase::Error::Deadline { .. } => EngineErrorKind::Unavailable,
        _ => EngineErrorKind::Other,
    };
    StoreError::Engine(EngineError { kind, message: format!("HBase error: {e}") })
}

fn family_text(table: &Table) -> String {
    String::from_utf8_lossy(&table.family).into_owned()
}

impl Engine for HBaseEngine {
    fn name(&self) -> &'static str {
        "hbase"
    }

    fn has_table(&self, table: &str) -> bool {
        self.tables.contains_key(table)
    }

    fn get(&self, table: &str, key: &[u8], _hints: ReadHints) -> Result<Option<Vec<u8>>, StoreError> {
        let t = self.table(table)?;
        let (qualifier, row) = t.read_qualifier(key);
        Ok(value_of(t, key, &self.row_cells(t, row, qualifier)?))
    }

    fn get_many(
        &self,
        table: &str,
        keys: &[&[u8]],
        _sorted: bool,
        _hints: ReadHints,
        f: &mut RowVisitor<'_>,
    ) -> Result<(), StoreError> {
        // Batched Gets (one Multi per region server), one batch per qualifier asked for: a cell table's keys name
        // the qualifier, the other tables read whole rows of the family (or its one plain cell).
        let t = self.table(table)?.clone();
        // By qualifier (none: whole rows): each key's index and row.
        let mut groups: std::collections::BTreeMap<Option<Vec<u8>>, Vec<IndexedRow>> = Default::default();
        for (i, key) in keys.iter().enumerate() {
            let (qualifier, row) = t.read_qualifier(key);
            groups.entry(qualifier.map(<[u8]>::to_vec)).or_default().push((i, row.to_vec()));
        }
        let client = self.client.clone();
        let (name, family) = (t.hbase.clone(), t.family.clone());
        let found = self.run(async move {
            let mut found = Vec::new();
            for (qualifier, rows) in groups {
                let qualifiers: Vec<&[u8]> = qualifier.iter().map(Vec::as_slice).collect();
                let row_keys: Vec<Vec<u8>> = rows.iter().map(|(_, r)| r.clone()).collect();
                let outcomes = client.get_many(&name, &row_keys, Some(family.as_slice()), &qualifiers).await;
                found.extend(rows.into_iter().map(|(i, _)| i).zip(outcomes));
            }
            found
        });
        let mut values: Vec<Option<Vec<u8>>> = vec![None; keys.len()];
        for (i, outcome) in found {
            values[i] = value_of(&t, keys[i], &outcome.map_err(hbase_error)?);
        }
        for (i, value) in values.iter().enumerate() {
            f(i, value.as_deref())?;
        }
        Ok(())
    }

    fn cursor(&self, table: &str, _hints: ReadHints) -> Option<Box<dyn Cursor + '_>> {
        let t = self.tables.get(table)?;
        Some(Box::new(self.unstarted_cursor(t)))
    }

    fn write(&self, batch: WriteBatch, _durability: Durability) -> Result<(), StoreError> {
        // HBase acknowledges a write once its WAL has it: Logged and Synced are the same here. Puts, deletes and
        // the merges of tables with parts go into one Multi per region server; merges into other cell tables are
        // read-modify-writes after it; a range delete applies everything before it first. A put or delete of a
        // key with parts resets it first (see [`reset_key`]); its new parts follow in the Multi. (The store never
        // merges into a key and then puts it in one batch; a batch that writes a key before resetting it has
        // its writes so far applied first.)
        let mut pending = Pending::default();
        for (op, table, key, value) in batch.iter() {
            let t = self.table(table)?;
            let parts = t.parts_of(key);
            match (op, t.cells, parts) {
                (Op::DeleteRange, _, _) => {
                    self.flush(&mut pending)?;
                    self.delete_range(t, key, value)?;
                }
                (Op::Put | Op::Delete, CellMap::Plain, _) if t.operands => {
                    // Its operand cells go first (a family delete, see [`reset_row`]); the put's cell follows in
                    // the Multi, as do merges after it.
                    let id = (table.to_string(), key.to_vec());
                    if pending.written.contains(&id) {
                        self.flush(&mut pending)?;
                    }
                    pending.row_resets.push((t.clone(), key.to_vec()));
                    if op == Op::Put {
                        pending.mutations.extend(write::mutations(op, t, key, value)?);
                    }
                    pending.written.insert(id);
                }
                (Op::Merge, CellMap::Plain, _) if t.operands => {
                    pending.mutations.push(operand_write(t, key, value));
                    pending.written.insert((table.to_string(), key.to_vec()));
                }
                (Op::Put | Op::Delete, _, Some(parts)) => {
                    let id = (table.to_string(), key.to_vec());
                    if pending.written.contains(&id) {
                        self.flush(&mut pending)?;
                    }
                    pending.resets.push((t.clone(), parts, key.to_vec()));
                    if op == Op::Put {
                        pending.mutations.extend(part_writes(t, parts, key, value, true));
                    }
                    pending.written.insert(id);
                }
                (Op::Merge, _, Some(parts)) => {
                    pending.mutations.extend(part_writes(t, parts, key, value, false));
                    pending.written.insert((table.to_string(), key.to_vec()));
                }
                (Op::Merge, CellMap::Plain | CellMap::QualifierRow, None) => {
                    if t.parts.is_some() {
                        pending.written.insert((table.to_string(), key.to_vec()));
                    }
                    match pending.merge_at.get(&(table.to_string(), key.to_vec())) {
                        Some(&i) => pending.merges[i].operands.push(value.to_vec()),
                        None => {
                            pending.merge_at.insert((table.to_string(), key.to_vec()), pending.merges.len());
                            pending.merges.push(PendingMerge {
                                table: t.clone(),
                                key: key.to_vec(),
                                operands: vec![value.to_vec()],
                            });
                        }
                    }
                }
                _ => {
                    if t.parts.is_some() {
                        pending.written.insert((table.to_string(), key.to_vec()));
                    }
                    pending.mutations.extend(write::mutations(op, t, key, value)?)
                }
            }
        }
        self.flush(&mut pending)
    }

    fn sync(&self) -> Result<(), StoreError> {
        Ok(())
    }

    fn increment(&self, table: &str, key: &[u8], delta: i64) -> Result<i64, StoreError> {
        let t = self.table(table)?;
        let (qualifier, row) = t.cell_of(key);
        let (client, name, family) = (self.client.clone(), t.hbase.clone(), t.family.clone());
        let (row, qualifier) = (row.to_vec(), qualifier.unwrap_or_default().to_vec());
        self.run(async move { client.increment(&name, &row, &family, &qualifier, delta).await }).map_err(hbase_error)
    }

    fn check_and_put(
        &self,
        table: &str,
        key: &[u8],
        expected: Option<&[u8]>,
        value: &[u8],
    ) -> Result<bool, StoreError> {
        let t = self.table(table)?;
        let (qualifier, row) = t.cell_of(key);
        self.cas(t, row, qualifier.unwrap_or_default(), expected, value)
    }

    fn check_and_put_many(&self, table: &str, cells: &[CheckAndPut<'_>]) -> Vec<Result<bool, StoreError>> {
        let t = match self.table(table) {
            Ok(t) => t,
            Err(e) => {
                let message = e.to_string();
                return cells.iter().map(|_| Err(StoreError::Corrupt(message.clone()))).collect();
            }
        };
        let calls: Vec<(Mutation, Vec<u8>, Vec<u8>)> = cells
            .iter()
            .map(|c| {
                let (qualifier, row) = t.cell_of(c.key);
                let qualifier = qualifier.unwrap_or_default().to_vec();
                let put = Mutation::put(&t.hbase, row, &t.family, vec![(qualifier.clone(), c.value.to_vec())]);
                (put, qualifier, c.expected.unwrap_or_default().to_vec())
            })
            .collect();
        // All in flight at once (bounded), each its own CheckAndPut: HBase has no multi-row compare-and-set, and
        // one round trip per cell, one after the other, is what made UID assignment slow (bench/RESULTS.md).
        let family = &t.family;
        let calls = calls
            .into_iter()
            .map(|(put, qualifier, expected)| {
                let (client, family) = (self.client.clone(), family.clone());
                async move { client.check_and_put(&put, &family, &qualifier, &expected).await }
            })
            .collect();
        let outcomes = self.run_at_most(CALLS_IN_FLIGHT, calls, "compare-and-set");
        outcomes.into_iter().map(|o| o.map_err(hbase_error)).collect()
    }

    /// OpenTSDB's `tsd.hbase.nsre` (regions found elsewhere than cached: a split, a move, a region opening) and
    /// `tsd.hbase.meta_lookups`, and rtsd's own `tsd.hbase.retries` (attempts repeated after a retriable error)
    /// and `tsd.hbase.server_failures` (servers given up on: down, timed out, stopping).
    fn client_stats(&self) -> Vec<crate::metrics::Stat> {
        use crate::metrics::Stat;
        let s = self.client.stats();
        vec![
            Stat { name: "hbase.meta_lookups", value: s.meta_lookups, tag: Some(("type", "uncontended")) },
            Stat { name: "hbase.nsre", value: s.relocations, tag: None },
            Stat { name: "hbase.retries", value: s.retries, tag: None },
            Stat { name: "hbase.server_failures", value: s.server_failures, tag: None },
        ]
        .into_iter()
        .chain(self.client.op_counts().into_iter().flat_map(|((table, kind), count)| {
            // rtsd's own: the client's calls by table and kind, and the cells they carried (what HBase is asked
            // to do per point; bench/RESULTS.md's breakdowns).
            let op = intern(&format!("{table}.{kind}"));
            [
                Stat { name: "hbase.ops", value: count.ops, tag: Some(("op", op)) },
                Stat { name: "hbase.cells", value: count.cells, tag: Some(("op", op)) },
            ]
        }))
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_tables_name_their_hbase_table_as_configured() {
        let names = HBaseTables { data: "prod-tsdb".into(), ..Default::default() };
        assert_eq!(hbase_table_name("tsdb", &names), "prod-tsdb");
        assert_eq!(hbase_table_name("tsdb-uid", &names), "tsdb-uid");
        assert_eq!(hbase_table_name("tsdb-rollup-1h", &names), "tsdb-rollup-1h");
    }

    #[test]
    fn park_on_reads_a_long_channel_inside_a_runtime_task() {
        // A cursor read during the daemon's start: inside a runtime's block_on, past tokio's budget of 128. Run
        // on a thread of its own so that a spin fails the test instead of hanging it.
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
            let sum = runtime.block_on(async {
                let (tx, mut rx) = tokio::sync::mpsc::channel::<u32>(16);
                tokio::spawn(async move {
                    for i in 0..1000 {
                        tx.send(i).await.unwrap();
                    }
                });
                let mut sum = 0u64;
                while let Some(i) = park_on(rx.recv()) {
                    sum += u64::from(i);
                }
                sum
            });
            let _ = done_tx.send(sum);
        });
        let sum = done_rx.recv_timeout(std::time::Duration::from_secs(20)).expect("park_on spun: no answer in 20 s");
        assert_eq!(sum, 999 * 1000 / 2);
    }

    #[test]
    fn a_namespace_holds_every_table_whose_name_names_none() {
        let names = HBaseTables {
            data: "prod-tsdb".into(),
            uid: "other:tsdb-uid".into(),
            namespace: "staging".into(),
            ..Default::default()
        };
        assert_eq!(hbase_table_name("tsdb", &names), "staging:prod-tsdb");
        assert_eq!(hbase_table_name("tsdb-uid", &names), "other:tsdb-uid");
        assert_eq!(hbase_table_name("rtsd", &names), "staging:rtsd");
        assert_eq!(hbase_table_name("tsdb-rollup-1h", &names), "staging:tsdb-rollup-1h");
        // A rollup table configured with a namespace keeps it; the family is after the last `:`.
        assert_eq!(split_store_name("ns:tsdb-rollup-1h:t"), ("ns:tsdb-rollup-1h", "t"));
        assert_eq!(split_store_name("tsdb:t"), ("tsdb", "t"));
        assert_eq!(hbase_table_name(split_store_name("ns:tsdb-rollup-1h:t").0, &names), "ns:tsdb-rollup-1h");
    }

    /// A merge that keeps the order it was given: the existing value, then each operand, joined by `|`.
    fn in_order() -> Merge {
        let full = Arc::new(|_key: &[u8], existing: Option<&[u8]>, operands: &[&[u8]], _: MergeContext| {
            let mut parts: Vec<&[u8]> = existing.into_iter().collect();
            parts.extend_from_slice(operands);
            parts.join(&b'|')
        });
        Merge { name: "test-in-order", full, partial: None }
    }

    fn cell(qualifier: &[u8], value: &[u8]) -> Cell {
        Cell {
            row: b"k".to_vec(),
            family: b"a".to_vec(),
            qualifier: qualifier.to_vec(),
            timestamp: 0,
            value: value.to_vec(),
        }
    }

    #[test]
    fn operand_qualifiers_sort_in_the_order_they_were_made() {
        // Operand cells are server-stamped like OpenTSDB's (spec: hbase §4 rule 3); their order is the qualifier's.
        let made: Vec<Vec<u8>> = (0..10_000).map(|_| operand_qualifier()).collect();
        for q in &made {
            assert_eq!((q.len(), q[0]), (OPERAND_QUALIFIER_LEN, OPERAND));
        }
        assert!(made.windows(2).all(|w| w[0] < w[1]), "strictly increasing within a process");
        // One process's two-byte suffix on all of them.
        assert!(made.iter().all(|q| q[9..] == made[0][9..]));
    }

    #[test]
    fn a_key_with_operand_cells_reads_as_its_put_then_its_operands_in_the_order_written() {
        let spec = TableSpec::new("tsdb-rollup-1h:a", CellMap::Plain, super::super::Tuning::Small)
            .with_merge(in_order())
            .with_blind_operands();
        let t = table_of(&spec, &HBaseOptions::new("127.0.0.1:2181"));
        assert!(t.operands);
        // A whole-row read (the operands are cells beside the empty-qualifier one).
        assert_eq!(t.read_qualifier(b"k"), (None, &b"k"[..]));
        let (q1, q2, q3) = (operand_qualifier(), operand_qualifier(), operand_qualifier());
        // HBase answers in qualifier order; given in any order, the join sorts them.
        let cells = vec![cell(&q3, b"c"), cell(b"", b"put"), cell(&q1, b"a"), cell(&q2, b"b")];
        assert_eq!(value_of(&t, b"k", &cells).as_deref(), Some(&b"put|a|b|c"[..]));
        // No put: the operands alone; no operand: the put as stored.
        assert_eq!(value_of(&t, b"k", &cells[2..]).as_deref(), Some(&b"a|b"[..]));
        assert_eq!(value_of(&t, b"k", &cells[1..2]).as_deref(), Some(&b"put"[..]));
        assert_eq!(value_of(&t, b"k", &[]), None);
        // The write is one blind Put of the operand into a cell of its own.
        let m = operand_write(&t, b"k", b"x");
        assert_eq!((m.kind, m.timestamp, m.columns.len()), (rtsd_hbase::MutationKind::Put, None, 1));
        assert_eq!((m.columns[0].0.len(), m.columns[0].1.as_slice()), (OPERAND_QUALIFIER_LEN, &b"x"[..]));
        assert!(m.columns[0].0 > q3);
    }

    #[test]
    fn operand_cells_replace_sum_parts_and_read_the_sums_stored_before() {
        // The rollup marks: a count summed, once an Increment of the part `+`, now a blind Put per merge.
        fn split(_key: &[u8], operand: &[u8]) -> Option<Vec<(usize, i64)>> {
            Some(vec![(0, i64::from_le_bytes(operand.try_into().ok()?))])
        }
        fn join(_key: &[u8], _index: usize, n: i64) -> Vec<u8> {
            n.to_le_bytes().to_vec()
        }
        let sum = Merge {
            name: "test-sum",
            full: Arc::new(|_: &[u8], existing: Option<&[u8]>, operands: &[&[u8]], _: MergeContext| {
                let n = |v: &[u8]| i64::from_le_bytes(v.try_into().unwrap());
                (existing.map_or(0, n) + operands.iter().map(|o| n(o)).sum::<i64>()).to_le_bytes().to_vec()
            }),
            partial: None,
        };
        let parts = Parts { parts: &[(b"+", Combine::Sum)], split, join };
        let spec = TableSpec::new("rtsd:rollup-dirty", CellMap::Plain, super::super::Tuning::Small)
            .with_merge(sum.clone())
            .with_parts(parts)
            .with_blind_operands();
        let t = table_of(&spec, &HBaseOptions::new("127.0.0.1:2181"));
        assert!(t.operands);
        let cells = vec![
            cell(b"+", &5i64.to_be_bytes()),
            cell(&operand_qualifier(), &7i64.to_le_bytes()),
            cell(&operand_qualifier(), &1i64.to_le_bytes()),
        ];
        assert_eq!(value_of(&t, b"k", &cells), Some(13i64.to_le_bytes().to_vec()));
        // Max or min parts keep their versioned Puts: no operand cells beside them (a family delete misses them).
        fn max_parts(_key: &[u8], _operand: &[u8]) -> Option<Vec<(usize, i64)>> {
            Some(Vec::new())
        }
        let max = Parts { parts: &[(b"M", Combine::Max)], split: max_parts, join };
        let spec = TableSpec::new("rtsd:series", CellMap::Plain, super::super::Tuning::Small)
            .with_merge(sum)
            .with_parts(max)
            .with_blind_operands();
        assert!(!table_of(&spec, &HBaseOptions::new("127.0.0.1:2181")).operands);
        // Not declared: merges stay read-modify-writes.
        let spec = TableSpec::new("rtsd:settings", CellMap::Plain, super::super::Tuning::Small).with_merge(in_order());
        assert!(!table_of(&spec, &HBaseOptions::new("127.0.0.1:2181")).operands);
    }
}
