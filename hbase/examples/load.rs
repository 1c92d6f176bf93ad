//! A rough throughput figure against a running cluster (not a benchmark suite):
//! `cargo run -p rtsd-hbase --release --example load -- ZK_QUORUM TABLE ROWS BATCH TASKS`
//! writes ROWS rows (family `f`, one 8-byte cell each) in Multi batches of BATCH from TASKS concurrent tasks, then
//! scans them back.
use std::time::Instant;

use rtsd_hbase::{Client, Mutation, ScanRequest};

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [zk, table, rows, batch, tasks] = &args[..] else {
        eprintln!("usage: load ZK_QUORUM TABLE ROWS BATCH TASKS");
        std::process::exit(2);
    };
    let (rows, batch, tasks): (usize, usize, usize) =
        (rows.parse().unwrap(), batch.parse().unwrap(), tasks.parse().unwrap());
    let c = Client::connect(zk, "/hbase").await.expect("connect");
    let t0 = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for k in 0..tasks {
        let (c, table) = (c.clone(), table.clone());
        set.spawn(async move {
            let mut n = k * batch;
            while n < rows {
                let ms = (n..(n + batch).min(rows))
                    .map(|i| {
                        let key = format!("load{:09}", i.wrapping_mul(2654435761) % 1_000_000_000).into_bytes();
                        Mutation::put(&table, &key, b"f", vec![(b"v".to_vec(), (i as u64).to_be_bytes().to_vec())])
                    })
                    .collect();
                for r in c.multi(ms).await {
                    r.expect("put");
                }
                n += batch * tasks;
            }
        });
    }
    set.join_all().await;
    let w = t0.elapsed();
    let t1 = Instant::now();
    let req = ScanRequest {
        table: table.clone(),
        start: b"load".to_vec(),
        stop: b"loae".to_vec(),
        caching: 1000,
        ..Default::default()
    };
    let n = c.scan_all(req).await.expect("scan").len();
    let s = t1.elapsed();
    // A scan whose filter matches nothing, with a short RPC timeout: the server's time limit (half the RPC
    // timeout) passes before a page fills, and it answers heartbeats instead of letting the call time out.
    let mut cfg = rtsd_hbase::Config::new(zk, "/hbase");
    cfg.rpc_timeout = std::time::Duration::from_millis(100);
    let hc = Client::with_config(cfg).await.expect("connect");
    let mut req = ScanRequest { table: table.clone(), caching: 1000, ..Default::default() };
    req.filter = Some(rtsd_hbase::Filter::row_regex(b"^never"));
    let mut sc = hc.scan(req);
    let t2 = Instant::now();
    while sc.next().await.expect("filtered scan").is_some() {}
    println!("filtered scan: {:.2?}, {} heartbeats, {} reopens", t2.elapsed(), sc.heartbeats(), sc.reopens());
    println!(
        "wrote {rows} rows in {w:.2?} ({:.0} rows/s); scanned {n} rows in {s:.2?} ({:.0} rows/s); {:?}",
        rows as f64 / w.as_secs_f64(),
        n as f64 / s.as_secs_f64(),
        c.stats()
    );
}
