//! Writes while the cluster changes under them: a split, a move, a region server SIGKILLed. A writer keeps
//! writing unique rows (Multi batches and concurrent single Puts, alternately) and one counter increment per batch,
//! and records what HBase acknowledged; afterwards a scan must return every acknowledged row exactly once, nothing
//! that was never written, and the counter must equal the acknowledged increments (give or take the failed ones,
//! whose outcome is unknown).
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rtsd_hbase::{Client, Mutation, ScanRequest};
use tokio::task::JoinSet;

use crate::Ctx;

const BATCH: usize = 25;

#[derive(Default, Debug)]
struct WriteLog {
    attempted: BTreeSet<Vec<u8>>,
    acked: BTreeSet<Vec<u8>>,
    failed: Vec<String>,
    ctr_acked: i64,
    ctr_failed: i64,
}

/// Unique keys spread over the table's regions (997 is prime to 3000, so the prefixes cycle through 0..3000).
fn row(idx: usize) -> Vec<u8> {
    format!("k{:05}-{idx:08}", idx * 997 % 3000).into_bytes()
}

async fn writer(c: Client, t: String, stop: Arc<AtomicBool>, acked: Arc<AtomicUsize>) -> WriteLog {
    let mut log = WriteLog::default();
    let mut idx = 0;
    let mut batch_no = 0;
    while !stop.load(Ordering::Relaxed) {
        let rows: Vec<Vec<u8>> = (0..BATCH).map(|i| row(idx + i)).collect();
        idx += BATCH;
        log.attempted.extend(rows.iter().cloned());
        let results: Vec<(Vec<u8>, Result<(), String>)> = if batch_no % 2 == 0 {
            let ms = rows.iter().map(|r| Mutation::put(&t, r, b"f", vec![(b"v".to_vec(), r.clone())])).collect();
            let out = c.multi(ms).await;
            rows.into_iter().zip(out).map(|(r, o)| (r, o.map(|_| ()).map_err(|e| e.to_string()))).collect()
        } else {
            let mut set = JoinSet::new();
            for r in rows {
                let (c, t) = (c.clone(), t.clone());
                set.spawn(async move {
                    let res = c.put(&t, &r, b"f", vec![(b"v".to_vec(), r.clone())]).await;
                    (r, res.map_err(|e| e.to_string()))
                });
            }
            set.join_all().await
        };
        for (r, res) in results {
            match res {
                Ok(()) => {
                    log.acked.insert(r);
                }
                Err(e) => log.failed.push(format!("{}: {e}", String::from_utf8_lossy(&r))),
            }
        }
        match c.increment(&t, b"ctr", b"f", b"n", 1).await {
            Ok(_) => log.ctr_acked += 1,
            Err(e) => {
                log.ctr_failed += 1;
                log.failed.push(format!("ctr: {e}"));
            }
        }
        acked.store(log.acked.len(), Ordering::Relaxed);
        batch_no += 1;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    log
}

struct Running {
    stop: Arc<AtomicBool>,
    acked: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<WriteLog>,
}

fn start_writer(ctx: &Ctx, t: &str) -> Running {
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(AtomicUsize::new(0));
    let task = tokio::spawn(writer(ctx.client.clone(), t.to_string(), stop.clone(), acked.clone()));
    Running { stop, acked, task }
}

impl Running {
    /// Waits until `n` more rows were acknowledged (the writer is making progress).
    async fn progress(&self, n: usize, within: Duration) {
        let (from, t0) = (self.acked.load(Ordering::Relaxed), Instant::now());
        while self.acked.load(Ordering::Relaxed) < from + n {
            assert!(!self.task.is_finished(), "the writer stopped");
            assert!(
                t0.elapsed() < within,
                "writes stalled at {} acknowledged rows",
                self.acked.load(Ordering::Relaxed)
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn finish(self) -> WriteLog {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.expect("writer")
    }
}

/// Every acknowledged row once, nothing never written, the counter within what was acknowledged and attempted.
async fn verify(c: &Client, t: &str, log: &WriteLog) {
    let req =
        ScanRequest { table: t.into(), start: b"k".to_vec(), stop: b"l".to_vec(), caching: 1000, ..Default::default() };
    let rows = c.scan_all(req).await.expect("scan after the fault");
    let mut seen = BTreeSet::new();
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(r.len(), 1, "row {i}");
        assert_eq!(r[0].value, r[0].row, "row {i}");
        assert!(seen.insert(r[0].row.clone()), "row {:?} returned twice", String::from_utf8_lossy(&r[0].row));
    }
    let lost: Vec<_> = log.acked.difference(&seen).map(|r| String::from_utf8_lossy(r).into_owned()).collect();
    assert!(lost.is_empty(), "{} acknowledged rows lost, e.g. {:?}", lost.len(), &lost[..lost.len().min(5)]);
    let phantom: Vec<_> = seen.difference(&log.attempted).collect();
    assert!(phantom.is_empty(), "{} rows never written", phantom.len());
    let ctr = c.get(t, b"ctr", Some(b"f"), &[b"n"]).await.unwrap();
    let n = i64::from_be_bytes(ctr[0].value.as_slice().try_into().unwrap());
    assert!(
        log.ctr_acked <= n && n <= log.ctr_acked + log.ctr_failed,
        "counter {n}, {} increments acknowledged, {} failed",
        log.ctr_acked,
        log.ctr_failed
    );
    eprintln!(
        "  {t}: {} rows written, {} acknowledged, {} stored, {} failed; counter {n} ({} acknowledged)",
        log.attempted.len(),
        log.acked.len(),
        seen.len(),
        log.failed.len(),
        log.ctr_acked
    );
}

/// A split or a move is retried invisibly: nothing fails, every row stored, the counter exact.
async fn during_writes(ctx: Arc<Ctx>, t: String, change: Vec<String>) {
    let stats0 = ctx.client.stats();
    let w = start_writer(&ctx, &t);
    w.progress(300, Duration::from_secs(60)).await;
    let ctx2 = ctx.clone();
    tokio::task::spawn_blocking(move || ctx2.cluster.tool(&change.iter().map(String::as_str).collect::<Vec<_>>()))
        .await
        .unwrap();
    w.progress(300, Duration::from_secs(60)).await;
    let log = w.finish().await;
    verify(&ctx.client, &t, &log).await;
    assert!(log.failed.is_empty(), "{} writes failed: {:?}", log.failed.len(), &log.failed[..log.failed.len().min(5)]);
    assert_eq!(log.acked.len(), log.attempted.len());
    // The change did hit the writes: a cached region was found stale and looked up again.
    let stats = ctx.client.stats();
    eprintln!("  client: {stats:?} (before: {stats0:?})");
    assert!(stats.relocations > stats0.relocations, "no write met the change: {stats:?}");
}

pub async fn split_during_writes(ctx: Arc<Ctx>) {
    let t = ctx.table("split_write");
    let before = ctx.client.locate(&t, b"k01500").await.unwrap();
    during_writes(ctx.clone(), t.clone(), vec!["split".into(), t.clone(), "k01500".into()]).await;
    let after = ctx.client.locate(&t, b"k01500").await.unwrap();
    assert_eq!((before.start.as_slice(), after.start.as_slice()), (b"k01000".as_slice(), b"k01500".as_slice()));
}

pub async fn move_during_writes(ctx: Arc<Ctx>) {
    let t = ctx.table("move_write");
    let before = ctx.client.locate(&t, b"k01500").await.unwrap();
    during_writes(ctx.clone(), t.clone(), vec!["move".into(), t.clone(), "k01500".into()]).await;
    let after = ctx.client.locate(&t, b"k01500").await.unwrap();
    assert_ne!(before.server, after.server, "the region moved");
}

pub async fn merge_during_writes(ctx: Arc<Ctx>) {
    let t = ctx.table("merge_write");
    during_writes(ctx.clone(), t.clone(), vec!["merge".into(), t.clone(), "k00000".into(), "k01000".into()]).await;
    let after = ctx.client.locate(&t, b"k01500").await.unwrap();
    assert_eq!((after.start.as_slice(), after.end.as_slice()), (b"".as_slice(), b"k02000".as_slice()));
}

/// The region server holding `hbase:meta` (and, moved there first, one of the table's regions) is SIGKILLed while
/// the writer runs: the client must find meta again (ZooKeeper names its new server once the master reassigned it)
/// and then the table's region.
pub async fn killed_region_server_during_writes(ctx: Arc<Ctx>) {
    let t = ctx.table("kill_write");
    let c = &ctx.client;
    let victim = c.meta_location().await.unwrap();
    if c.locate(&t, b"k01500").await.unwrap().server != victim {
        let (ctx2, t2, v2) = (ctx.clone(), t.clone(), victim.clone());
        tokio::task::spawn_blocking(move || ctx2.cluster.tool(&["move", &t2, "k01500", &v2])).await.unwrap();
    }
    let rs = ctx.cluster.rs_number(&victim);
    let w = start_writer(&ctx, &t);
    w.progress(300, Duration::from_secs(60)).await;
    let t0 = Instant::now();
    let ctx2 = ctx.clone();
    tokio::task::spawn_blocking(move || ctx2.cluster.script(&["kill-rs", &rs.to_string()])).await.unwrap();
    // Writes to the dead server's regions wait (retrying) until the master reassigned them; then they go on.
    w.progress(600, Duration::from_secs(150)).await;
    eprintln!("  rs{rs} ({victim}, hbase:meta's) killed; 600 more rows acknowledged after {:.0?}", t0.elapsed());
    let log = w.finish().await;
    verify(c, &t, &log).await;
    eprintln!("  client: {:?}", c.stats());
    assert!(c.stats().server_failures > 0, "no write met the dead server");
    assert_ne!(c.meta_location().await.unwrap(), victim, "hbase:meta moved off the killed server");
    for n in (0..3000).step_by(500) {
        let loc = c.locate(&t, format!("k{n:05}").as_bytes()).await.unwrap();
        assert_ne!(loc.server, victim, "a region still on the killed server");
    }
    // Back to three servers: the cluster may be shared (scripts/test's, RTSD_HBASE_TEST_CLUSTER).
    let ctx2 = ctx.clone();
    tokio::task::spawn_blocking(move || {
        ctx2.cluster.script(&["start-rs", &rs.to_string()]);
        ctx2.cluster.script(&["wait", "3"]);
    })
    .await
    .unwrap();
}
