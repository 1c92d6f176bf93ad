//! Master admin calls: a family's TTL set, read back exactly, applied by the region servers, and cleared, with
//! every other attribute and configuration entry of the family (and the other family) left as they were.
use std::sync::Arc;

use rtsd_hbase::{Error, Mutation};

use crate::Ctx;

/// The attributes other than `TTL`.
fn without_ttl(f: &rtsd_hbase::FamilyDescriptor) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut a: Vec<_> = f.attributes.iter().filter(|(k, _)| k != b"TTL").cloned().collect();
    a.sort();
    a
}

pub async fn family_ttl_set_read_back_cleared(ctx: Arc<Ctx>) {
    let t = ctx.table("ttl");
    let c = &ctx.client;
    let g_before = c.family(&t, b"g").await.unwrap();
    assert_eq!(c.family_ttl(&t, b"f").await.unwrap(), None, "a new family keeps cells forever");

    // Give `f` attributes and a configuration entry of its own, so that keeping them is tested.
    let mut f = c.family(&t, b"f").await.unwrap();
    f.set_attribute("VERSIONS", "3");
    f.set_attribute("BLOOMFILTER", "ROWCOL");
    f.configuration.push(("hbase.hstore.blockingStoreFiles".into(), "23".into()));
    c.modify_family(&t, &f).await.unwrap();
    let f_before = c.family(&t, b"f").await.unwrap();
    assert_eq!(f_before.attribute("VERSIONS"), Some(&b"3"[..]));
    assert_eq!(f_before.attribute("BLOOMFILTER"), Some(&b"ROWCOL"[..]));
    assert!(f_before.configuration.contains(&("hbase.hstore.blockingStoreFiles".into(), "23".into())));

    // Ten days, as `rtsd.retention.raw_hours=240` asks.
    assert!(c.set_family_ttl(&t, b"f", Some(864_000)).await.unwrap());
    assert_eq!(c.family_ttl(&t, b"f").await.unwrap(), Some(864_000));
    let f_after = c.family(&t, b"f").await.unwrap();
    assert_eq!(f_after.attribute("TTL"), Some(&b"864000"[..]));
    assert_eq!(without_ttl(&f_after), without_ttl(&f_before));
    assert_eq!(f_after.configuration, f_before.configuration);
    assert_eq!(c.family(&t, b"g").await.unwrap(), g_before, "the other family is untouched");
    // Already so: nothing sent.
    assert!(!c.set_family_ttl(&t, b"f", Some(864_000)).await.unwrap());

    // The region servers apply it: a cell stamped two hours ago is gone under a one-hour TTL, a fresh one is not.
    assert!(c.set_family_ttl(&t, b"f", Some(3600)).await.unwrap());
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    let old = Mutation::put(&t, b"r1", b"f", vec![(b"old".to_vec(), b"v".to_vec())]).with_timestamp(now - 7_200_000);
    c.mutate(&old).await.unwrap();
    c.put(&t, b"r1", b"f", vec![(b"new".to_vec(), b"v".to_vec())]).await.unwrap();
    let got = c.get(&t, b"r1", Some(b"f"), &[]).await.unwrap();
    assert_eq!(got.iter().map(|c| c.qualifier.as_slice()).collect::<Vec<_>>(), vec![b"new".as_slice()]);

    // Back to forever: HBase's own value, and the rest still as it was.
    assert!(c.set_family_ttl(&t, b"f", None).await.unwrap());
    assert_eq!(c.family_ttl(&t, b"f").await.unwrap(), None);
    let f_end = c.family(&t, b"f").await.unwrap();
    assert_eq!(f_end.attribute("TTL").unwrap_or(b"2147483647"), b"2147483647");
    assert_eq!(without_ttl(&f_end), without_ttl(&f_before));
    assert_eq!(f_end.configuration, f_before.configuration);
    assert_eq!(c.family(&t, b"g").await.unwrap(), g_before);

    // Errors are typed and immediate.
    let e = c.family_ttl(&t, b"nope").await.unwrap_err();
    assert_eq!(e.remote_class(), Some("InvalidFamilyOperationException"), "{e}");
    assert!(matches!(c.set_family_ttl(&t, b"f", Some(0)).await, Err(Error::Invalid(_))));
    let e = c.family_ttl(&ctx.table("no_such_table"), b"f").await.unwrap_err();
    assert!(matches!(e, Error::TableNotFound(_)), "{e}");
}

/// The master found through `ClientMetaService.GetActiveMaster` instead of ZooKeeper's `master` znode.
pub async fn family_ttl_without_zookeeper(ctx: Arc<Ctx>) {
    let t = ctx.table("ttl");
    let some_rs = ctx.client.locate(&t, b"r1").await.unwrap().server;
    let mut cfg = rtsd_hbase::Config::new("127.0.0.1:1", "/nowhere");
    cfg.bootstrap_servers = vec![some_rs];
    let c = rtsd_hbase::Client::with_config(cfg).await.unwrap();
    assert!(c.set_family_ttl(&t, b"g", Some(7200)).await.unwrap());
    assert_eq!(ctx.client.family_ttl(&t, b"g").await.unwrap(), Some(7200));
    assert!(c.set_family_ttl(&t, b"g", None).await.unwrap());
    assert_eq!(c.family_ttl(&t, b"g").await.unwrap(), None);
}
