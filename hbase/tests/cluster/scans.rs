//! Scans: paging over many regions, bounds, filters, partial rows; a split and a move under an open scanner.
use std::sync::Arc;

use rtsd_hbase::{Cell, Client, Filter, Mutation, ScanRequest};

use crate::Ctx;

pub fn key(n: usize) -> Vec<u8> {
    format!("k{n:05}").into_bytes()
}

/// Writes rows `key(n)` for `n` in `range`, value = the key, in Multi batches; every one must succeed.
pub async fn fill(c: &Client, t: &str, range: std::ops::Range<usize>) {
    let ms: Vec<Mutation> = range.map(|n| Mutation::put(t, &key(n), b"f", vec![(b"v".to_vec(), key(n))])).collect();
    for chunk in ms.chunks(500) {
        for (i, r) in c.multi(chunk.to_vec()).await.into_iter().enumerate() {
            r.unwrap_or_else(|e| panic!("put {i} of a chunk: {e}"));
        }
    }
}

/// Asserts the rows are exactly `key(n)` for `n` in `range`, in order, each with its one cell.
pub fn assert_rows(rows: &[Vec<Cell>], range: std::ops::Range<usize>) {
    let want = range.len();
    for (i, (row, n)) in rows.iter().zip(range).enumerate() {
        assert_eq!(row.len(), 1, "row {i}: {row:?}");
        assert_eq!(row[0].row, key(n), "row {i} (of {} rows, {want} expected)", rows.len());
        assert_eq!(row[0].value, key(n), "row {i}");
    }
    assert_eq!(rows.len(), want);
}

fn req(t: &str, start: &[u8], stop: &[u8], caching: u32) -> ScanRequest {
    ScanRequest {
        table: t.to_string(),
        start: start.to_vec(),
        stop: stop.to_vec(),
        families: vec![(b"f".to_vec(), vec![])],
        caching,
        ..Default::default()
    }
}

pub async fn scan_many_regions_small_caching(ctx: Arc<Ctx>) {
    let t = ctx.table("scan");
    let c = &ctx.client;
    fill(c, &t, 0..2000).await;
    // Ten regions, seven rows a page: ~290 pages, nine region changes.
    assert_rows(&c.scan_all(req(&t, b"", b"", 7)).await.unwrap(), 0..2000);
    // Bounds inside regions and on region boundaries.
    assert_rows(&c.scan_all(req(&t, &key(150), &key(1250), 13)).await.unwrap(), 150..1250);
    assert_rows(&c.scan_all(req(&t, &key(200), &key(400), 1000)).await.unwrap(), 200..400);
    assert_rows(&c.scan_all(req(&t, b"k00399\x00", &key(401), 1)).await.unwrap(), 400..401);
    assert!(c.scan_all(req(&t, &key(500), &key(500), 5)).await.unwrap().is_empty());
    assert!(c.scan_all(req(&t, b"l", b"", 5)).await.unwrap().is_empty());
    assert_eq!(c.locate(&t, &key(1999)).await.unwrap().start, key(1800));
}

pub async fn scan_bounds_filters_and_partials(ctx: Arc<Ctx>) {
    let t = ctx.table("scan");
    let c = &ctx.client;
    fill(c, &t, 0..2000).await;
    // PrefixFilter {prefix = 1}: rows k012xx only.
    let mut r = req(&t, b"", b"", 50);
    r.filter = Some(Filter::prefix(b"k012"));
    assert_rows(&c.scan_all(r.clone()).await.unwrap(), 1200..1300);
    // OpenTSDB's row regex (RowFilter + RegexStringComparator, ISO-8859-1), alone and in a FilterList.
    r.filter = Some(Filter::row_regex(b"(?s)^k01.*7$"));
    let got = c.scan_all(r.clone()).await.unwrap();
    assert_eq!(got.len(), 100);
    assert!(got.iter().all(|row| row[0].row.starts_with(b"k01") && row[0].row.ends_with(b"7")));
    r.filter = Some(Filter::list(true, vec![Filter::prefix(b"k019"), Filter::row_regex(b"7$"), Filter::key_only()]));
    let got = c.scan_all(r.clone()).await.unwrap();
    let keys: Vec<_> = got.iter().map(|row| (row[0].row.clone(), row[0].value.len())).collect();
    assert_eq!(keys, (0..10).map(|i| (key(1907 + 10 * i), 0)).collect::<Vec<_>>());
    r.filter = Some(Filter::list(false, vec![Filter::prefix(b"k00001"), Filter::row_regex(b"\\x00|^k01999$")]));
    let got: Vec<_> = c.scan_all(r).await.unwrap().into_iter().map(|row| row[0].row.clone()).collect();
    assert_eq!(got, vec![key(1), key(1999)]);
    // A byte above 0x7f in the pattern stands for itself.
    c.put(&t, b"k00800\xe9", b"f", vec![(b"v".to_vec(), b"k00800\xe9".to_vec())]).await.unwrap();
    let mut r = req(&t, b"", b"", 50);
    r.filter = Some(Filter::row_regex(b"\xe9$"));
    let got = c.scan_all(r).await.unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0][0].row, b"k00800\xe9");
    c.mutate(&Mutation::delete_row(&t, b"k00800\xe9")).await.unwrap();
    // A row of 40 cells of 50 KB with a 64 KB result size: the server sends it in parts, the scanner stitches it.
    let big: Vec<(Vec<u8>, Vec<u8>)> = (0..40u8).map(|i| (vec![b'q', i], vec![i; 50_000])).collect();
    c.put(&t, b"k00700-big", b"f", big.clone()).await.unwrap();
    let mut r = req(&t, &key(700), &key(701), 100);
    r.max_result_size = 64 << 10;
    let mut s = c.scan(r);
    let mut rows = Vec::new();
    rest(&mut s, &mut rows).await;
    assert!(s.partial_results() >= 10, "{} partial results", s.partial_results());
    assert_eq!(rows.len(), 2, "k00700 and k00700-big");
    let got: Vec<(Vec<u8>, Vec<u8>)> = rows[1].iter().map(|c| (c.qualifier.clone(), c.value.clone())).collect();
    assert_eq!(got.len(), 40);
    assert!(got == big, "the big row comes back whole and in order");
    c.mutate(&Mutation::delete_row(&t, b"k00700-big")).await.unwrap();
}

/// Reads `n` rows from the scanner.
async fn take(s: &mut rtsd_hbase::Scanner, n: usize, into: &mut Vec<Vec<Cell>>) {
    for _ in 0..n {
        into.push(s.next().await.unwrap().expect("more rows"));
    }
}

async fn rest(s: &mut rtsd_hbase::Scanner, into: &mut Vec<Vec<Cell>>) {
    while let Some(r) = s.next().await.unwrap() {
        into.push(r);
    }
}

pub async fn split_during_scan(ctx: Arc<Ctx>) {
    let t = ctx.table("split_scan");
    let c = &ctx.client;
    fill(c, &t, 0..3000).await;
    let mut s = c.scan(req(&t, b"", b"", 10));
    let mut rows = Vec::new();
    // The scanner is open in the region [k01000, k02000) ...
    take(&mut s, 1500, &mut rows).await;
    let before = c.locate(&t, &key(1500)).await.unwrap();
    assert_eq!(before.start, key(1000));
    // ... when that region splits at k01700 (the rows before and after the split point are still to come).
    let ctx2 = ctx.clone();
    let t2 = t.clone();
    tokio::task::spawn_blocking(move || ctx2.cluster.tool(&["split", &t2, "k01700"])).await.unwrap();
    rest(&mut s, &mut rows).await;
    assert!(s.reopens() >= 1, "the split closed the open region scanner");
    assert_rows(&rows, 0..3000);
    // The cache learnt the daughters.
    let after = c.locate(&t, &key(1800)).await.unwrap();
    assert_eq!((after.start.as_slice(), after.end.as_slice()), (key(1700).as_slice(), key(2000).as_slice()));
    assert_rows(&c.scan_all(req(&t, b"", b"", 333)).await.unwrap(), 0..3000);
}

pub async fn move_during_scan(ctx: Arc<Ctx>) {
    let t = ctx.table("move_scan");
    let c = &ctx.client;
    fill(c, &t, 0..3000).await;
    let mut s = c.scan(req(&t, b"", b"", 10));
    let mut rows = Vec::new();
    take(&mut s, 1405, &mut rows).await;
    // The lease of the open scanner can be extended (a caller pausing between pages).
    s.renew_lease().await.unwrap();
    let before = c.locate(&t, &key(1500)).await.unwrap();
    let ctx2 = ctx.clone();
    let t2 = t.clone();
    let to = tokio::task::spawn_blocking(move || ctx2.cluster.tool(&["move", &t2, "k01500"])).await.unwrap();
    assert_ne!(to.trim(), before.server);
    rest(&mut s, &mut rows).await;
    assert!(s.reopens() >= 1, "the move closed the open region scanner");
    assert_rows(&rows, 0..3000);
    let after = c.locate(&t, &key(1500)).await.unwrap();
    assert_eq!(after.server, to.trim(), "the cache follows the move");
}

pub async fn merge_during_scan(ctx: Arc<Ctx>) {
    let t = ctx.table("merge_scan");
    let c = &ctx.client;
    fill(c, &t, 0..3000).await;
    let mut s = c.scan(req(&t, b"", b"", 10));
    let mut rows = Vec::new();
    take(&mut s, 1500, &mut rows).await;
    // The open scanner's region [k01000, k02000) merges with [k02000, end).
    let ctx2 = ctx.clone();
    let t2 = t.clone();
    tokio::task::spawn_blocking(move || ctx2.cluster.tool(&["merge", &t2, "k01000", "k02000"])).await.unwrap();
    rest(&mut s, &mut rows).await;
    assert!(s.reopens() >= 1, "the merge closed the open region scanner");
    assert_rows(&rows, 0..3000);
    let after = c.locate(&t, &key(2500)).await.unwrap();
    assert_eq!((after.start.as_slice(), after.end.as_slice()), (key(1000).as_slice(), b"".as_slice()));
    assert_eq!(c.locate(&t, &key(1500)).await.unwrap().name, after.name, "one cached region for the merged range");
}
