//! Single-row calls and Multi: exact bytes in, exact bytes out.
use std::collections::BTreeSet;
use std::sync::Arc;

use rtsd_hbase::{Error, Mutation};

use crate::Ctx;

fn kv(q: &[u8], v: &[u8]) -> (Vec<u8>, Vec<u8>) {
    (q.to_vec(), v.to_vec())
}

pub async fn put_get_exact_bytes(ctx: Arc<Ctx>) {
    let t = ctx.table("basic");
    let c = &ctx.client;
    // Every byte value, a qualifier with a zero byte, an empty value, and a 100 KB value.
    let all: Vec<u8> = (0..=255u8).collect();
    let big: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let row = b"r1\x00\xff".as_slice();
    c.put(&t, row, b"f", vec![kv(b"\x00q\x01", &all), kv(b"empty", b""), kv(b"big", &big)]).await.unwrap();
    let got = c.get(&t, row, Some(b"f"), &[]).await.unwrap();
    let cols: Vec<(&[u8], &[u8])> = got.iter().map(|c| (c.qualifier.as_slice(), c.value.as_slice())).collect();
    assert_eq!(cols, vec![(b"\x00q\x01".as_slice(), all.as_slice()), (b"big", &big), (b"empty", b"")]);
    assert!(got.iter().all(|c| c.row == row && c.family == b"f" && c.timestamp > 1_600_000_000_000));
    // Qualifier selection and an explicit timestamp.
    c.mutate(&Mutation::put(&t, row, b"g", vec![kv(b"ts", b"v")]).with_timestamp(1234)).await.unwrap();
    let got = c.get(&t, row, Some(b"g"), &[b"ts"]).await.unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!((got[0].timestamp, got[0].value.as_slice()), (1234, b"v".as_slice()));
    // Overwrite: one version kept, the new value answered.
    c.put(&t, row, b"f", vec![kv(b"empty", b"now set")]).await.unwrap();
    let got = c.get(&t, row, Some(b"f"), &[b"empty"]).await.unwrap();
    assert_eq!(got.iter().map(|c| c.value.clone()).collect::<Vec<_>>(), vec![b"now set".to_vec()]);
}

pub async fn get_absent_and_families(ctx: Arc<Ctx>) {
    let t = ctx.table("basic");
    let c = &ctx.client;
    assert!(c.get(&t, b"r2-absent", None, &[]).await.unwrap().is_empty());
    c.put(&t, b"r2", b"f", vec![kv(b"a", b"1")]).await.unwrap();
    c.put(&t, b"r2", b"g", vec![kv(b"b", b"2")]).await.unwrap();
    let got = c.get(&t, b"r2", None, &[]).await.unwrap();
    let fams: Vec<(&[u8], &[u8], &[u8])> =
        got.iter().map(|c| (c.family.as_slice(), c.qualifier.as_slice(), c.value.as_slice())).collect();
    assert_eq!(fams, vec![(b"f".as_slice(), b"a".as_slice(), b"1".as_slice()), (b"g", b"b", b"2")]);
    assert!(c.get(&t, b"r2", Some(b"f"), &[b"zz"]).await.unwrap().is_empty());
    // A family the table does not have is the server's NoSuchColumnFamilyException, not retried.
    let e = c.get(&t, b"r2", Some(b"nope"), &[]).await.unwrap_err();
    assert_eq!(e.remote_class(), Some("NoSuchColumnFamilyException"), "{e}");
}

pub async fn append_and_increment(ctx: Arc<Ctx>) {
    let t = ctx.table("basic");
    let c = &ctx.client;
    let got = c.append(&t, b"r4", b"f", vec![kv(b"log", b"\x05\x00")]).await.unwrap();
    assert_eq!(got.iter().map(|c| c.value.clone()).collect::<Vec<_>>(), vec![b"\x05\x00".to_vec()]);
    let got = c.append(&t, b"r4", b"f", vec![kv(b"log", b"\x01\xff")]).await.unwrap();
    assert_eq!(got[0].value, b"\x05\x00\x01\xff");
    assert_eq!(c.get(&t, b"r4", Some(b"f"), &[b"log"]).await.unwrap()[0].value, b"\x05\x00\x01\xff");
    assert_eq!(c.increment(&t, b"r4", b"f", b"ctr", 1).await.unwrap(), 1);
    assert_eq!(c.increment(&t, b"r4", b"f", b"ctr", 41).await.unwrap(), 42);
    assert_eq!(c.increment(&t, b"r4", b"f", b"ctr", -2).await.unwrap(), 40);
    assert_eq!(c.get(&t, b"r4", Some(b"f"), &[b"ctr"]).await.unwrap()[0].value, 40i64.to_be_bytes());
    // 50 concurrent increments: each applied exactly once, the answers a permutation of 41..=90.
    let mut tasks = Vec::new();
    for _ in 0..50 {
        let (c, t) = (c.clone(), t.clone());
        tasks.push(tokio::spawn(async move { c.increment(&t, b"r4", b"f", b"ctr", 1).await.unwrap() }));
    }
    let mut seen = BTreeSet::new();
    for task in tasks {
        seen.insert(task.await.unwrap());
    }
    assert_eq!(seen, (41..=90).collect::<BTreeSet<i64>>());
}

pub async fn check_and_put(ctx: Arc<Ctx>) {
    let t = ctx.table("basic");
    let c = &ctx.client;
    let put = |v: &[u8]| Mutation::put(&t, b"r5", b"f", vec![kv(b"id", v)]);
    // Absent -> set (empty expected value = the cell must not exist), as OpenTSDB's UID assignment does it.
    assert!(c.check_and_put(&put(b"\x00\x00\x01"), b"f", b"id", b"").await.unwrap());
    // Present -> the same CAS fails and leaves the value.
    assert!(!c.check_and_put(&put(b"\x00\x00\x02"), b"f", b"id", b"").await.unwrap());
    // Mismatch -> false.
    assert!(!c.check_and_put(&put(b"\x00\x00\x03"), b"f", b"id", b"\x00\x00\x09").await.unwrap());
    assert_eq!(c.get(&t, b"r5", Some(b"f"), &[b"id"]).await.unwrap()[0].value, b"\x00\x00\x01");
    // Match -> replaced.
    assert!(c.check_and_put(&put(b"\x00\x00\x04"), b"f", b"id", b"\x00\x00\x01").await.unwrap());
    assert_eq!(c.get(&t, b"r5", Some(b"f"), &[b"id"]).await.unwrap()[0].value, b"\x00\x00\x04");
    // 20 racers on a fresh cell: exactly one wins, and the cell holds the winner's value.
    let mut tasks = Vec::new();
    for i in 0..20u8 {
        let (c, t) = (c.clone(), t.clone());
        tasks.push(tokio::spawn(async move {
            let m = Mutation::put(&t, b"r5-race", b"f", vec![kv(b"id", &[i])]);
            (i, c.check_and_put(&m, b"f", b"id", b"").await.unwrap())
        }));
    }
    let mut winners = Vec::new();
    for task in tasks {
        let (i, won) = task.await.unwrap();
        if won {
            winners.push(i);
        }
    }
    assert_eq!(winners.len(), 1, "{winners:?}");
    assert_eq!(c.get(&t, b"r5-race", Some(b"f"), &[b"id"]).await.unwrap()[0].value, vec![winners[0]]);
}

pub async fn delete_columns_family_row(ctx: Arc<Ctx>) {
    let t = ctx.table("basic");
    let c = &ctx.client;
    c.put(&t, b"r7", b"f", vec![kv(b"a", b"1"), kv(b"b", b"2"), kv(b"c", b"3")]).await.unwrap();
    c.put(&t, b"r7", b"g", vec![kv(b"x", b"9")]).await.unwrap();
    c.delete(&t, b"r7", b"f", &[b"a", b"c"]).await.unwrap();
    let quals = |cells: Vec<rtsd_hbase::Cell>| cells.into_iter().map(|c| c.qualifier).collect::<Vec<_>>();
    assert_eq!(quals(c.get(&t, b"r7", None, &[]).await.unwrap()), vec![b"b".to_vec(), b"x".to_vec()]);
    c.delete(&t, b"r7", b"f", &[]).await.unwrap();
    assert_eq!(quals(c.get(&t, b"r7", None, &[]).await.unwrap()), vec![b"x".to_vec()]);
    c.mutate(&Mutation::delete_row(&t, b"r7")).await.unwrap();
    assert!(c.get(&t, b"r7", None, &[]).await.unwrap().is_empty());
}

/// A delete of one version masks only that version: the newest version below it is served again, and a later
/// write at another timestamp, below the deleted one's too, is not masked (what a delete of every version up to
/// a timestamp would do until a major compaction). rtsd's blind max/min cells rely on this.
pub async fn delete_one_version(ctx: Arc<Ctx>) {
    let t = ctx.table("basic");
    let c = &ctx.client;
    let put = |v: &[u8], ts: u64| Mutation::put(&t, b"r8", b"f", vec![kv(b"m", v)]).with_timestamp(ts);
    let values = |cells: Vec<rtsd_hbase::Cell>| cells.into_iter().map(|c| (c.timestamp, c.value)).collect::<Vec<_>>();
    c.multi(vec![put(b"old", 1 << 50), put(b"new", 3 << 50)]).await.into_iter().for_each(|o| {
        o.unwrap();
    });
    assert_eq!(values(c.get(&t, b"r8", Some(b"f"), &[b"m"]).await.unwrap()), vec![(3 << 50, b"new".to_vec())]);
    c.mutate(&Mutation::delete_version(&t, b"r8", b"f", &[b"m"], 3 << 50)).await.unwrap();
    assert_eq!(values(c.get(&t, b"r8", Some(b"f"), &[b"m"]).await.unwrap()), vec![(1 << 50, b"old".to_vec())]);
    c.mutate(&Mutation::delete_version(&t, b"r8", b"f", &[b"m"], 1 << 50)).await.unwrap();
    assert!(c.get(&t, b"r8", Some(b"f"), &[b"m"]).await.unwrap().is_empty());
    c.mutate(&put(b"again", 2 << 50)).await.unwrap();
    assert_eq!(values(c.get(&t, b"r8", Some(b"f"), &[b"m"]).await.unwrap()), vec![(2 << 50, b"again".to_vec())]);
    // Without its timestamp it is refused before it is sent.
    let mut m = Mutation::delete_version(&t, b"r8", b"f", &[b"m"], 1);
    m.timestamp = None;
    assert!(matches!(c.mutate(&m).await, Err(Error::Invalid(_))));
}

pub async fn multi_across_region_servers(ctx: Arc<Ctx>) {
    let t = ctx.table("basic");
    let c = &ctx.client;
    // Rows in all three regions (split at r3 and r6); a new table's regions are spread over the servers.
    let rows: Vec<Vec<u8>> = (0..300).map(|i| format!("r{}-m{i:03}", i % 10).into_bytes()).collect();
    let mut servers = BTreeSet::new();
    for r in &rows {
        servers.insert(c.locate(&t, r).await.unwrap().server);
    }
    assert!(servers.len() >= 2, "the regions of {t} are all on {servers:?}");
    let mut ms: Vec<Mutation> =
        rows.iter().map(|r| Mutation::put(&t, r, b"f", vec![kv(b"v", r), kv(b"w", b"\x00")])).collect();
    ms.push(Mutation::increment(&t, b"r9-ctr", b"f", b"n", 7));
    ms.push(Mutation::append(&t, b"r0-app", b"f", vec![kv(b"a", b"xy")]));
    // An invalid one fails alone; a missing family fails alone on the server.
    ms.push(Mutation::put(&t, b"", b"f", vec![kv(b"v", b"x")]));
    ms.push(Mutation::put(&t, b"r1-bad", b"nope", vec![kv(b"v", b"x")]));
    let out = c.multi(ms).await;
    assert_eq!(out.len(), 304);
    for (i, o) in out[..300].iter().enumerate() {
        assert!(matches!(o, Ok(cells) if cells.is_empty()), "mutation {i}: {o:?}");
    }
    assert_eq!(out[300].as_ref().unwrap()[0].value, 7i64.to_be_bytes());
    assert_eq!(out[301].as_ref().unwrap()[0].value, b"xy");
    assert!(matches!(out[302], Err(Error::Invalid(_))), "{:?}", out[302]);
    assert_eq!(out[303].as_ref().unwrap_err().remote_class(), Some("NoSuchColumnFamilyException"));
    // Read back in one batch (one Multi per server), with absent rows and an invalid one among them.
    let mut keys = rows.clone();
    keys.push(b"r5-absent".to_vec());
    keys.push(Vec::new());
    let got = c.get_many(&t, &keys, Some(b"f"), &[b"v"]).await;
    assert_eq!(got.len(), 302);
    for (r, g) in rows.iter().zip(&got) {
        let g = g.as_ref().unwrap();
        assert_eq!((g.len(), g[0].row.as_slice(), g[0].value.as_slice()), (1, r.as_slice(), r.as_slice()));
    }
    assert!(got[300].as_ref().unwrap().is_empty());
    assert!(matches!(got[301], Err(Error::Invalid(_))), "{:?}", got[301]);
    for r in &rows {
        let got = c.get(&t, r, Some(b"f"), &[]).await.unwrap();
        let vals: Vec<(&[u8], &[u8])> = got.iter().map(|c| (c.qualifier.as_slice(), c.value.as_slice())).collect();
        assert_eq!(vals, vec![(b"v".as_slice(), r.as_slice()), (b"w", b"\x00")]);
    }
}

pub async fn missing_table_is_typed(ctx: Arc<Ctx>) {
    let c = &ctx.client;
    let t0 = std::time::Instant::now();
    let e = c.get("no_such_table", b"r", None, &[]).await.unwrap_err();
    assert!(matches!(&e, Error::TableNotFound(t) if t == "no_such_table"), "{e:?}");
    let e = c.put("no_such_table", b"r", b"f", vec![kv(b"q", b"v")]).await.unwrap_err();
    assert!(matches!(e, Error::TableNotFound(_)), "{e:?}");
    assert!(t0.elapsed().as_secs() < 5, "not retried until the deadline");
}

/// HBase >= 2.5 serves meta's location from any region server (`ClientMetaService`): a client bootstrapped from one
/// region server, with no ZooKeeper address at all, finds meta and reads what the ZooKeeper-bootstrapped one wrote.
pub async fn bootstrap_without_zookeeper(ctx: Arc<Ctx>) {
    let t = ctx.table("basic");
    let meta = ctx.client.meta_location().await.unwrap();
    let some_rs = ctx.client.locate(&t, b"r9").await.unwrap().server;
    let mut cfg = rtsd_hbase::Config::new("127.0.0.1:1", "/nowhere");
    cfg.bootstrap_servers = vec!["127.0.0.1:1".into(), some_rs];
    let c = rtsd_hbase::Client::with_config(cfg).await.unwrap();
    assert_eq!(c.meta_location().await.unwrap(), meta);
    ctx.client.put(&t, b"r9-boot", b"f", vec![kv(b"q", b"zk-less")]).await.unwrap();
    assert_eq!(c.get(&t, b"r9-boot", Some(b"f"), &[]).await.unwrap()[0].value, b"zk-less");
}
