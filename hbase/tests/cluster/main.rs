//! rtsd-hbase against a real HBase 2.6 cluster (ZooKeeper + HMaster + 3 region servers from
//! `scripts/hbase-cluster`). One cluster serves every case; cases run one after the other (two cores), each on its
//! own tables, and the fault cases last. `cargo test -p rtsd-hbase --test cluster -- NAME` runs the cases whose
//! name contains NAME.
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rtsd_hbase::{Client, Config};

mod admin;
mod basic;
mod faults;
mod fixture;
mod scans;

pub struct Ctx {
    pub cluster: fixture::Cluster,
    pub client: Client,
    suffix: String,
}

impl Ctx {
    /// This run's name of a test table.
    pub fn table(&self, name: &str) -> String {
        format!("{name}_{}", self.suffix)
    }
}

type CaseFn = fn(Arc<Ctx>) -> Pin<Box<dyn Future<Output = ()> + Send>>;

macro_rules! cases {
    ($($m:ident :: $f:ident),* $(,)?) => {
        vec![$((concat!(stringify!($m), "::", stringify!($f)), (|c| Box::pin($m::$f(c))) as CaseFn)),*]
    };
}

/// Every table the cases use, created in one JVM run: (name, families, split rows).
fn tables() -> Vec<(&'static str, &'static str, Vec<String>)> {
    let every = |step: usize, n: usize| (1..n).map(|i| format!("k{:05}", i * step)).collect::<Vec<_>>();
    vec![
        ("basic", "f,g", vec!["r3".into(), "r6".into()]),
        ("scan", "f", every(200, 10)),
        ("split_scan", "f", every(1000, 3)),
        ("move_scan", "f", every(1000, 3)),
        ("merge_scan", "f", every(1000, 3)),
        ("split_write", "f", every(1000, 3)),
        ("move_write", "f", every(1000, 3)),
        ("merge_write", "f", every(1000, 3)),
        ("kill_write", "f", every(500, 6)),
        ("ttl", "f,g", vec!["r5".into()]),
    ]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // libtest's arguments: names to run (substrings), `--skip NAME` (substring) to leave out, flags ignored.
    // scripts/test passes `--skip` to every test binary of the workspace.
    let (mut filters, mut skips) = (Vec::new(), Vec::new());
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--skip" => skips.extend(it.next()),
            flag if flag.starts_with('-') => {}
            name => filters.push(name),
        }
    }
    let all = cases![
        basic::put_get_exact_bytes,
        basic::get_absent_and_families,
        basic::append_and_increment,
        basic::check_and_put,
        basic::delete_columns_family_row,
        basic::delete_one_version,
        basic::multi_across_region_servers,
        basic::missing_table_is_typed,
        basic::bootstrap_without_zookeeper,
        admin::family_ttl_set_read_back_cleared,
        admin::family_ttl_without_zookeeper,
        scans::scan_many_regions_small_caching,
        scans::scan_bounds_filters_and_partials,
        scans::split_during_scan,
        scans::move_during_scan,
        scans::merge_during_scan,
        faults::split_during_writes,
        faults::move_during_writes,
        faults::merge_during_writes,
        faults::killed_region_server_during_writes,
    ];
    if args.iter().any(|a| a == "--list") {
        for (name, _) in &all {
            println!("{name}: test");
        }
        return;
    }
    let total = all.len();
    let cases: Vec<_> = all
        .into_iter()
        .filter(|(n, _)| filters.is_empty() || filters.iter().any(|f| n.contains(f)))
        .filter(|(n, _)| !skips.iter().any(|s| n.contains(s.as_str())))
        .collect();
    let filtered = total - cases.len();
    let t0 = Instant::now();
    println!("\nrunning {} tests", cases.len());
    let mut failed = Vec::new();
    if !cases.is_empty() {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_all().build().unwrap();
        let cluster = fixture::Cluster::start();
        let suffix = format!("{}", std::process::id());
        let mut create = Vec::new();
        for (name, fams, splits) in tables() {
            if !create.is_empty() {
                create.push("--".to_string());
            }
            create.push(format!("{name}_{suffix}"));
            create.push(fams.to_string());
            create.extend(splits);
        }
        let mut tool_args = vec!["create"];
        tool_args.extend(create.iter().map(String::as_str));
        let t = Instant::now();
        cluster.tool(&tool_args);
        eprintln!("cluster: test tables created in {:.0?}", t.elapsed());
        let mut cfg = Config::new(&cluster.zk, "/hbase");
        // Regions of a SIGKILLed server come back after its ZooKeeper session expires (10 s here) and its WAL is
        // split: allow more than that for one call.
        cfg.operation_timeout = Duration::from_secs(120);
        cfg.rpc_timeout = Duration::from_secs(10);
        let client = rt.block_on(Client::with_config(cfg)).expect("connect");
        let ctx = Arc::new(Ctx { cluster, client, suffix });
        for (name, f) in cases {
            let t = Instant::now();
            let res = rt.block_on(rt.spawn(f(ctx.clone())));
            match res {
                Ok(()) => println!("test {name} ... ok ({:.1}s)", t.elapsed().as_secs_f64()),
                Err(e) => {
                    println!("test {name} ... FAILED ({:.1}s): {e}", t.elapsed().as_secs_f64());
                    failed.push(name);
                }
            }
        }
        // Tasks a failed case left running go first; the last handle on the context then stops the cluster.
        rt.shutdown_timeout(Duration::from_secs(5));
        drop(ctx);
    }
    let passed = total - filtered - failed.len();
    if !failed.is_empty() {
        println!("\nfailures:");
        for f in &failed {
            println!("    {f}");
        }
    }
    println!(
        "\ntest result: {}. {passed} passed; {} failed; 0 ignored; 0 measured; {filtered} filtered out; finished in {:.2}s\n",
        if failed.is_empty() { "ok" } else { "FAILED" },
        failed.len(),
        t0.elapsed().as_secs_f64()
    );
    if !failed.is_empty() {
        std::process::exit(101);
    }
}
