//! The servers under test, started on loopback with scratch data directories and stopped by a guard.
//!
//! rtsd speaks telnet, `/api/put`, `/api/query` and `/metrics` on one port. VictoriaMetrics takes telnet puts on
//! `-opentsdbListenAddr`, `/api/put` on `-opentsdbHTTPListenAddr`, and queries and `/metrics` on
//! `-httpListenAddr`. OpenTSDB 2.4.1 runs on its HBase test bed (`scripts/hbase-cluster` + `scripts/opentsdb-ref`:
//! ZooKeeper, an HMaster, 3 region servers and the TSD, each a JVM), telnet and HTTP on the TSD's one port; its
//! stored-points count is `tsd.datapoints.added` of `/api/stats`. rtsd-on-HBase is the same rtsd binary with
//! `rtsd.storage.engine=hbase` on a test bed of its own, brought up by the same code ([`Testbed`]).
//!
//! CPU, RSS and disk of a server on a test bed: [`Server::cpu_seconds`] and [`Server::peak_rss_kib`] are the whole
//! test bed's (the server's process and the cluster's JVMs: neither TSD does anything without HBase), the `_own`
//! variants the server's process alone (rtsd, or OpenTSDB's TSD JVM); the disk is the cluster's HBase root.

use crate::http;
use std::fs::File;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Which server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Rtsd,
    Vm,
    OpenTsdb,
    /// rtsd with `rtsd.storage.engine=hbase` on a fresh HBase test bed.
    RtsdHbase,
}

impl Kind {
    /// Every kind, in `--servers` order of the help text.
    pub const ALL: [Kind; 4] = [Kind::Rtsd, Kind::Vm, Kind::OpenTsdb, Kind::RtsdHbase];

    pub fn label(self) -> &'static str {
        match self {
            Kind::Rtsd => "rtsd",
            Kind::Vm => "VictoriaMetrics",
            Kind::OpenTsdb => "OpenTSDB",
            Kind::RtsdHbase => "rtsd-on-HBase",
        }
    }
    /// The name `--servers` takes, and the scratch directories' prefix.
    pub fn short(self) -> &'static str {
        match self {
            Kind::Rtsd => "rtsd",
            Kind::Vm => "vm",
            Kind::OpenTsdb => "opentsdb",
            Kind::RtsdHbase => "rtsd-hbase",
        }
    }
    /// The kind `--servers` names `s`.
    pub fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.short() == s)
    }
    /// Speaks OpenTSDB's HTTP API for queries (rtsd on either engine, OpenTSDB).
    pub fn opentsdb_api(self) -> bool {
        self != Kind::Vm
    }
    /// Runs on an HBase test bed ([`Testbed`]).
    pub fn on_hbase(self) -> bool {
        matches!(self, Kind::OpenTsdb | Kind::RtsdHbase)
    }
}

/// `--servers LIST`: comma-separated [`Kind::short`] names.
pub fn parse_servers(list: &str) -> Result<Vec<Kind>, String> {
    let kinds = list
        .split(',')
        .map(|s| Kind::parse(s.trim()).ok_or_else(|| format!("unknown server {:?}", s.trim())))
        .collect::<Result<Vec<_>, _>>()?;
    for (i, k) in kinds.iter().enumerate() {
        if kinds[..i].contains(k) {
            return Err(format!("server {:?} named twice", k.short()));
        }
    }
    Ok(kinds)
}

/// Which ingest protocol's counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    Telnet,
    Http,
}

/// An HBase test bed (`scripts/hbase-cluster up DIR`: ZooKeeper, an HMaster and 3 region servers, each a JVM,
/// with OpenTSDB's and rtsd's tables), and OpenTSDB's TSD on it once [`Testbed::start_tsd`] started one. Stopped
/// by [`Testbed::down`], which [`Server::stop`] calls after stopping the server's own process.
pub struct Testbed {
    scripts: PathBuf,
    pub dir: PathBuf,
    /// `127.0.0.1:PORT`, for `tsd.storage.hbase.zk_quorum`.
    pub zk_quorum: String,
    /// `scripts/opentsdb-ref up` ran in `dir` (its `down` goes first).
    tsd: bool,
    /// Not yet taken down.
    running: bool,
}

impl Testbed {
    /// A fresh cluster under `dir` (emptied first). On failure the script has stopped whatever it started.
    pub fn up(scripts: &Path, dir: &Path) -> Result<Testbed, String> {
        if dir.exists() {
            std::fs::remove_dir_all(dir).map_err(|e| format!("clearing {}: {e}", dir.display()))?;
        }
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let mut tb = Testbed {
            scripts: scripts.to_path_buf(),
            dir: dir.to_path_buf(),
            zk_quorum: String::new(),
            tsd: false,
            running: true,
        };
        let d = tb.dir.to_string_lossy().into_owned();
        let up = tb.script("hbase-cluster", &["up", &d], &[])?;
        tb.zk_quorum = parse_zk_quorum(&up).ok_or_else(|| format!("hbase-cluster printed no zk_quorum: {up:?}"))?;
        Ok(tb)
    }

    /// OpenTSDB 2.4.1's TSD on the cluster (`scripts/opentsdb-ref up DIR`, with `extra_conf` lines appended to its
    /// opentsdb.conf); returns its port and pid.
    fn start_tsd(&mut self, extra_conf: &str) -> Result<(u16, u32), String> {
        let d = self.dir.to_string_lossy().into_owned();
        // From here on, `down` stops the TSD too (a no-op when it did not start).
        self.tsd = true;
        let up = self.script("opentsdb-ref", &["up", &d], &[("OPENTSDB_REF_EXTRA_CONF", extra_conf)])?;
        let port: u16 = up
            .lines()
            .find_map(|l| l.strip_prefix("port="))
            .and_then(|p| p.trim().parse().ok())
            .ok_or_else(|| format!("opentsdb-ref printed no port: {up:?}"))?;
        let pid = std::fs::read_to_string(self.dir.join("tsd/tsd.pid"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .ok_or("no tsd/tsd.pid")?;
        Ok((port, pid))
    }

    /// Runs `scripts/<script> args` and returns its stdout, or its stderr's last lines as the error.
    fn script(&self, script: &str, args: &[&str], env: &[(&str, &str)]) -> Result<String, String> {
        let out = Command::new(self.scripts.join(script))
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("running scripts/{script}: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "scripts/{script} {} failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).lines().rev().take(15).collect::<Vec<_>>().join(" | ")
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The cluster's JVMs (ZooKeeper, HMaster, region servers: `DIR/pids/*.pid`; the TSD's pid is elsewhere).
    fn jvm_pids(&self) -> Vec<u32> {
        let mut pids = Vec::new();
        for entry in std::fs::read_dir(self.dir.join("pids")).into_iter().flatten().flatten() {
            if entry.path().extension().and_then(|e| e.to_str()) == Some("pid") {
                if let Some(p) = std::fs::read_to_string(entry.path()).ok().and_then(|s| s.trim().parse().ok()) {
                    pids.push(p);
                }
            }
        }
        pids
    }

    /// HBase's root directory (HFiles and WALs).
    pub fn hbase_dir(&self) -> PathBuf {
        self.dir.join("hbase")
    }

    /// Stops the TSD (if started) and the cluster by their scripts: by PID, SIGTERM (region servers flush their
    /// memstores), SIGKILL after a timeout.
    pub fn down(&mut self) -> Result<(), String> {
        self.running = false;
        let d = self.dir.to_string_lossy().into_owned();
        let scripts: &[&str] = if self.tsd { &["opentsdb-ref", "hbase-cluster"] } else { &["hbase-cluster"] };
        let failed: Vec<&str> =
            scripts.iter().copied().filter(|s| self.script(s, &["down", &d], &[]).is_err()).collect();
        if failed.is_empty() {
            Ok(())
        } else {
            Err(format!("{failed:?} down failed"))
        }
    }
}

/// CPU-seconds per second below which a server (with its cluster) counts as idle (see [`Server::wait_quiet`]).
const QUIET_CORES: f64 = 0.3;
/// Seconds in a row a server must be idle to count as quiet.
const QUIET_SECS: u32 = 3;
/// The least a wait for quiet takes.
const QUIET_AFTER: Duration = Duration::from_secs(8);

/// The `zk_quorum=HOST:PORT` line `scripts/hbase-cluster up` prints.
pub fn parse_zk_quorum(out: &str) -> Option<String> {
    out.lines().find_map(|l| l.strip_prefix("zk_quorum=")).map(|q| q.trim().to_string()).filter(|q| !q.is_empty())
}

/// A running server. Dropping it stops the process (SIGTERM, then SIGKILL after 10 s), then its test bed.
pub struct Server {
    pub kind: Kind,
    child: Option<Child>,
    pub pid: u32,
    pub data_dir: PathBuf,
    pub log: PathBuf,
    /// Where telnet `put` lines go.
    pub telnet: SocketAddr,
    /// Where `POST /api/put` goes.
    pub http_put: SocketAddr,
    /// Where `/metrics` and queries go.
    pub api: SocketAddr,
    /// OpenTSDB and rtsd-on-HBase: the HBase test bed (for OpenTSDB also the TSD's, which has no `child`).
    testbed: Option<Testbed>,
}

/// `n` distinct free loopback ports (all held until all are chosen).
fn free_ports(n: usize) -> Result<Vec<SocketAddr>, String> {
    let listeners = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").map_err(|e| format!("binding a free port: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    listeners.iter().map(|l| l.local_addr().map_err(|e| e.to_string())).collect()
}

/// Sends `signal` (a `kill` name such as `TERM`) to `pid`.
fn signal(pid: u32, signal: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// `dir`, emptied (created when missing).
fn fresh_dir(dir: &Path) -> Result<PathBuf, String> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|e| format!("clearing {}: {e}", dir.display()))?;
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    Ok(dir.to_path_buf())
}

/// The rtsd arguments that put it on the HBase cluster whose ZooKeeper is `zk_quorum` (OpenTSDB's tables there,
/// as `scripts/hbase-cluster` created them).
pub fn rtsd_hbase_args(zk_quorum: &str) -> Vec<String> {
    ["rtsd.storage.engine=hbase".to_string(), format!("tsd.storage.hbase.zk_quorum={zk_quorum}")]
        .into_iter()
        .flat_map(|kv| ["--set".to_string(), kv])
        .collect()
}

impl Server {
    /// Starts `kind` from `bin` with a fresh data directory `dir/<kind>-data` and its log in `dir/<kind>.log`,
    /// and waits (at most 60 s) until it answers. OpenTSDB: `bin` is the workspace's `scripts/`. rtsd-on-HBase
    /// needs both the binary and the scripts: [`Server::start_rtsd_hbase`].
    pub fn start(kind: Kind, bin: &Path, dir: &Path) -> Result<Server, String> {
        Server::start_with_args(kind, bin, dir, &[])
    }

    /// [`Server::start`] with extra command-line arguments (e.g. `--set key=value` for rtsd).
    pub fn start_with_args(kind: Kind, bin: &Path, dir: &Path, extra: &[String]) -> Result<Server, String> {
        match kind {
            Kind::OpenTsdb => return Server::start_opentsdb(bin, dir),
            Kind::RtsdHbase => {
                return Err("rtsd-on-HBase starts by Server::start_rtsd_hbase (it needs scripts/)".into())
            }
            Kind::Rtsd | Kind::Vm => {}
        }
        let data_dir = fresh_dir(&dir.join(format!("{}-data", kind.short())))?;
        let mut server = Server::spawn(kind, bin, dir, data_dir, extra)?;
        server.wait_ready(Duration::from_secs(60))?;
        Ok(server)
    }

    /// Starts rtsd (`kind` Rtsd or RtsdHbase) or VictoriaMetrics from `bin` on free ports with `data_dir`, its log
    /// in `dir/<kind>.log`, without waiting for it.
    fn spawn(kind: Kind, bin: &Path, dir: &Path, data_dir: PathBuf, extra: &[String]) -> Result<Server, String> {
        let log = dir.join(format!("{}.log", kind.short()));
        let log_file = File::create(&log).map_err(|e| format!("creating {}: {e}", log.display()))?;
        let log_err = log_file.try_clone().map_err(|e| e.to_string())?;
        // If the runner dies without running its guards (a signal), the kernel sends the server SIGTERM:
        // `setpriv --pdeathsig` (util-linux) sets that up and then execs the server, so the pid stays the server's.
        let mut cmd = match which("setpriv") {
            Some(setpriv) => {
                let mut c = Command::new(setpriv);
                c.args(["--pdeathsig", "TERM", "--"]).arg(bin);
                c
            }
            None => Command::new(bin),
        };
        let (telnet, http_put, api);
        match kind {
            Kind::Rtsd | Kind::RtsdHbase => {
                let addr = free_ports(1)?[0];
                (telnet, http_put, api) = (addr, addr, addr);
                cmd.arg("serve")
                    .arg("--data-dir")
                    .arg(&data_dir)
                    .arg("--port")
                    .arg(addr.port().to_string())
                    .arg("--bind")
                    .arg("127.0.0.1");
            }
            Kind::OpenTsdb => unreachable!("started by start_opentsdb"),
            Kind::Vm => {
                let p = free_ports(3)?;
                (api, telnet, http_put) = (p[0], p[1], p[2]);
                cmd.arg("-storageDataPath")
                    .arg(&data_dir)
                    .arg(format!("-httpListenAddr={api}"))
                    .arg(format!("-opentsdbListenAddr={telnet}"))
                    .arg(format!("-opentsdbHTTPListenAddr={http_put}"));
            }
        }
        cmd.args(extra);
        cmd.stdin(Stdio::null()).stdout(log_file).stderr(log_err);
        let child = cmd.spawn().map_err(|e| format!("starting {}: {e}", bin.display()))?;
        let pid = child.id();
        Ok(Server { kind, child: Some(child), pid, data_dir, log, telnet, http_put, api, testbed: None })
    }

    /// A fresh HBase test bed under `dir/opentsdb-data` and OpenTSDB 2.4.1's TSD on it, by the workspace's
    /// `scripts` (the scripts wait until HBase has its tables and the TSD answers).
    fn start_opentsdb(scripts: &Path, dir: &Path) -> Result<Server, String> {
        let data_dir = dir.join("opentsdb-data");
        let mut server = Server {
            kind: Kind::OpenTsdb,
            child: None,
            pid: 0,
            log: data_dir.join("tsd/tsd.log"),
            data_dir: data_dir.clone(),
            telnet: SocketAddr::from(([127, 0, 0, 1], 0)),
            http_put: SocketAddr::from(([127, 0, 0, 1], 0)),
            api: SocketAddr::from(([127, 0, 0, 1], 0)),
            // From here on, dropping the server stops whatever did start.
            testbed: Some(Testbed::up(scripts, &data_dir)?),
        };
        // Rollups off: with them on (the test bed's default, as rtsd.conf), 2.4.1 answers a 1m downsample (q1-q3)
        // from the rollup table, which nothing here writes, so it would answer [] (differences.json,
        // query/rollup/*).
        let tb = server.testbed.as_mut().expect("set above");
        let (port, pid) = tb.start_tsd("tsd.rollups.enable = false")?;
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        (server.telnet, server.http_put, server.api) = (addr, addr, addr);
        server.pid = pid;
        Ok(server)
    }

    /// rtsd from `bin` with `rtsd.storage.engine=hbase` on a fresh HBase test bed under `dir/rtsd-hbase-cluster`
    /// (brought up as OpenTSDB's, by [`Testbed::up`]), its `--data-dir` `dir/rtsd-hbase-data` beside it and its log
    /// `dir/rtsd-hbase.log`; `extra` are more rtsd arguments. Waits (at most 120 s) until rtsd answers.
    pub fn start_rtsd_hbase(bin: &Path, scripts: &Path, dir: &Path, extra: &[String]) -> Result<Server, String> {
        let testbed = Testbed::up(scripts, &dir.join("rtsd-hbase-cluster"))?;
        let mut args = rtsd_hbase_args(&testbed.zk_quorum);
        args.extend_from_slice(extra);
        let data_dir = fresh_dir(&dir.join("rtsd-hbase-data"));
        let spawned = data_dir.and_then(|d| Server::spawn(Kind::RtsdHbase, bin, dir, d, &args));
        let mut server = match spawned {
            Ok(s) => s,
            Err(e) => {
                let mut testbed = testbed;
                let _ = testbed.down();
                return Err(e);
            }
        };
        // From here on, dropping the server stops rtsd, then the cluster.
        server.testbed = Some(testbed);
        // Opening the store on HBase reads rtsd's settings and the UID maps from the cluster: more than a local
        // RocksDB open under load.
        server.wait_ready(Duration::from_secs(120))?;
        Ok(server)
    }

    /// The server's own processes: rtsd or VictoriaMetrics, or OpenTSDB's TSD JVM (no test bed JVM).
    fn own_pids(&self) -> Vec<u32> {
        vec![self.pid]
    }

    /// Every process the server needs: its own, and its test bed's JVMs.
    fn pids(&self) -> Vec<u32> {
        let mut pids = self.own_pids();
        if let Some(tb) = &self.testbed {
            pids.extend(tb.jvm_pids());
        }
        pids
    }

    /// Where the server keeps its data (on a test bed: HBase's root directory, WALs included).
    pub fn disk_dir(&self) -> PathBuf {
        match &self.testbed {
            Some(tb) => tb.hbase_dir(),
            None => self.data_dir.clone(),
        }
    }

    fn wait_ready(&mut self, limit: Duration) -> Result<(), String> {
        let until = Instant::now() + limit;
        while Instant::now() < until {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    return Err(format!(
                        "{} exited during start-up ({status}); log:\n{}",
                        self.kind.label(),
                        self.log_tail(20)
                    ));
                }
            }
            let metrics_ok = http::get(self.api, "/metrics", Duration::from_secs(2)).is_ok_and(|r| r.status == 200);
            let ports_ok = [self.telnet, self.http_put]
                .iter()
                .all(|a| TcpStream::connect_timeout(a, Duration::from_secs(1)).is_ok());
            if metrics_ok && ports_ok {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(format!("{} did not answer within {limit:?}; log:\n{}", self.kind.label(), self.log_tail(20)))
    }

    /// The last `n` lines of the server's log.
    pub fn log_tail(&self, n: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    /// `/metrics` as text.
    pub fn metrics(&self) -> Result<String, String> {
        // On HBase a /metrics counts the series by a scan of the series index on the cluster (see `stored`).
        let limit = Duration::from_secs(if self.kind.on_hbase() { 300 } else { 10 });
        let r = http::get(self.api, "/metrics", limit).map_err(|e| format!("/metrics: {e}"))?;
        if r.status != 200 {
            return Err(format!("/metrics answered {}", r.status));
        }
        Ok(r.text())
    }

    /// The server's own count of stored points for `proto`.
    pub fn stored(&self, proto: Proto) -> Result<u64, String> {
        if self.kind.on_hbase() {
            // OpenTSDB: counted as the TSD hands a point to asynchbase, which sends it to HBase within
            // tsd.storage.flush_interval (1 s); the q1/q2 checks read every point back. rtsd-on-HBase: counted once
            // HBase acknowledged the point, as `rtsd_datapoints_added_total` (telnet and HTTP together: one protocol
            // per measurement). Not from /metrics: there rtsd counts its series by a scan of the whole series
            // index on the cluster (every 10 s), which took more than 10 s during A's ingest.
            let r =
                http::get(self.api, "/api/stats", Duration::from_secs(30)).map_err(|e| format!("/api/stats: {e}"))?;
            let v: serde_json::Value = serde_json::from_slice(&r.body).map_err(|e| format!("/api/stats: {e}"))?;
            return Ok(v
                .as_array()
                .into_iter()
                .flatten()
                .find(|s| s["metric"] == "tsd.datapoints.added")
                .and_then(|s| s["value"].as_f64().or_else(|| s["value"].as_str()?.parse().ok()))
                .unwrap_or(0.0) as u64);
        }
        let series = match (self.kind, proto) {
            (Kind::Rtsd, Proto::Telnet) => r#"rtsd_datapoints_added_total{protocol="telnet"}"#,
            (Kind::Rtsd, Proto::Http) => r#"rtsd_datapoints_added_total{protocol="http"}"#,
            (Kind::Vm, Proto::Telnet) => r#"vm_rows_inserted_total{type="opentsdb"}"#,
            (Kind::Vm, Proto::Http) => r#"vm_rows_inserted_total{type="opentsdbhttp"}"#,
            (Kind::OpenTsdb | Kind::RtsdHbase, _) => unreachable!("read from /api/stats above"),
        };
        Ok(metric_value(&self.metrics()?, series).unwrap_or(0.0) as u64)
    }

    /// User + system CPU seconds the server has used so far (all threads; on a test bed: its own process and the
    /// cluster's JVMs).
    pub fn cpu_seconds(&self) -> Option<f64> {
        self.pids().into_iter().map(cpu_seconds_of).sum()
    }

    /// [`Server::cpu_seconds`] of the server's own process alone (rtsd, or OpenTSDB's TSD JVM).
    pub fn cpu_seconds_own(&self) -> Option<f64> {
        self.own_pids().into_iter().map(cpu_seconds_of).sum()
    }

    /// Peak resident set size so far (`VmHWM`, what `/usr/bin/time -v` reports as maximum RSS), in KiB; on a test
    /// bed the sum of its own process's and the cluster's JVMs' peaks.
    pub fn peak_rss_kib(&self) -> Option<u64> {
        self.pids().into_iter().map(peak_rss_kib_of).sum()
    }

    /// [`Server::peak_rss_kib`] of the server's own process alone.
    pub fn peak_rss_kib_own(&self) -> Option<u64> {
        self.own_pids().into_iter().map(peak_rss_kib_of).sum()
    }

    /// VictoriaMetrics: `/internal/force_flush`, then `/internal/force_merge` of each month prefix, then waits
    /// (at most `limit`) until no forced merge is active; rtsd: waits until RocksDB has settled ([`Server::settle`]);
    /// on a test bed, until the server and its cluster are idle ([`Server::wait_quiet`]).
    pub fn flush_and_merge(&self, months: &[String], limit: Duration) -> Result<(), String> {
        match self.kind {
            Kind::Rtsd => return self.settle(limit),
            // What the burst left the cluster to do (rtsd-on-HBase writing its rows, asynchbase's buffered puts,
            // HBase's own flushes) counts for either server alike. OpenTSDB's compaction leaves the data sets'
            // current hour alone until it closes.
            Kind::RtsdHbase => {
                self.settle(limit)?;
                return self.wait_quiet(limit).map(|_| ());
            }
            Kind::OpenTsdb => return self.wait_quiet(limit).map(|_| ()),
            Kind::Vm => {}
        }
        let t = Duration::from_secs(120);
        let r = http::get(self.api, "/internal/force_flush", t).map_err(|e| format!("force_flush: {e}"))?;
        if r.status != 200 {
            return Err(format!("force_flush answered {}: {}", r.status, r.text()));
        }
        for m in months {
            let r = http::get(self.api, &format!("/internal/force_merge?partition_prefix={m}"), t)
                .map_err(|e| format!("force_merge: {e}"))?;
            if r.status != 200 {
                return Err(format!("force_merge answered {}: {}", r.status, r.text()));
            }
        }
        // The merge runs in the background. `vm_active_force_merges` has been seen at 0 while a merge was still
        // running (and a SIGTERM then makes 1.79 panic: "unexpected refCount=2 when closing the partition"), so
        // wait for the log line that says each merge finished, and for the gauge.
        let until = Instant::now() + limit;
        loop {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            let done = log
                .lines()
                .filter(|l| l.contains("forced merge for partition_prefix=") && !l.contains("has been started"))
                .count();
            let active = metric_value(&self.metrics()?, "vm_active_force_merges").unwrap_or(0.0);
            if done >= months.len() && active == 0.0 {
                return Ok(());
            }
            if Instant::now() > until {
                return Err(format!("force merge still running after {limit:?}"));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until the server and, on a test bed, its cluster have used less than [`QUIET_CORES`] of CPU for
    /// [`QUIET_SECS`] seconds in a row, and at least [`QUIET_AFTER`] has passed (rtsd-on-HBase writes what it
    /// acknowledged into rows 5 s later): what follows a warm-up burst before the measured one, so the measured
    /// burst shares the cluster with nothing left over. Returns how long it waited.
    pub fn wait_quiet(&self, limit: Duration) -> Result<Duration, String> {
        let t0 = Instant::now();
        let cpu = || self.cpu_seconds().ok_or_else(|| "the server's CPU time is unreadable".to_string());
        let mut last = cpu()?;
        let mut quiet = 0;
        loop {
            std::thread::sleep(Duration::from_secs(1));
            let now = cpu()?;
            quiet = if now - last < QUIET_CORES { quiet + 1 } else { 0 };
            last = now;
            if quiet >= QUIET_SECS && t0.elapsed() >= QUIET_AFTER {
                return Ok(t0.elapsed());
            }
            if t0.elapsed() > limit {
                return Err(format!("{} still busy after {limit:?}", self.kind.label()));
            }
        }
    }

    /// rtsd's counterpart of VictoriaMetrics' forced merge: waits until RocksDB has no compaction or flush running
    /// or pending (`rtsd_rocksdb_background_work` 0 on two reads 0.5 s apart), so reads are timed on a settled
    /// store, as VictoriaMetrics' are on merged parts.
    fn settle(&self, limit: Duration) -> Result<(), String> {
        let until = Instant::now() + limit;
        let mut quiet = 0;
        while quiet < 2 {
            let work = metric_value(&self.metrics()?, "rtsd_rocksdb_background_work")
                .ok_or("rtsd_rocksdb_background_work missing from /metrics")?;
            quiet = if work == 0.0 { quiet + 1 } else { 0 };
            if Instant::now() > until {
                return Err(format!("RocksDB background work still going after {limit:?}"));
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        Ok(())
    }

    /// Stops the server with SIGTERM (all flush their data on it) and waits at most `limit`, then SIGKILL; then
    /// its test bed, if any (OpenTSDB's TSD first), by its scripts.
    pub fn stop(&mut self, limit: Duration) -> Result<(), String> {
        let own = self.stop_child(limit);
        let testbed = match self.testbed.as_mut() {
            Some(tb) if tb.running => tb.down(),
            _ => Ok(()),
        };
        own.and(testbed)
    }

    fn stop_child(&mut self, limit: Duration) -> Result<(), String> {
        let Some(mut child) = self.child.take() else { return Ok(()) };
        signal(self.pid, "TERM");
        let until = Instant::now() + limit;
        loop {
            match child.try_wait() {
                Ok(Some(status)) if status.success() => return Ok(()),
                Ok(Some(status)) => return Err(format!("{} exited with {status}", self.kind.label())),
                Ok(None) if Instant::now() < until => std::thread::sleep(Duration::from_millis(20)),
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(format!("{} did not stop within {limit:?}; killed", self.kind.label()));
                }
            }
        }
    }

    /// True while the process runs.
    pub fn running(&mut self) -> bool {
        if self.kind == Kind::OpenTsdb {
            return self.testbed.as_ref().is_some_and(|tb| tb.running)
                && std::path::Path::new(&format!("/proc/{}", self.pid)).exists();
        }
        self.child.as_mut().is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.child.is_some() || self.testbed.as_ref().is_some_and(|tb| tb.running) {
            let _ = self.stop(Duration::from_secs(10));
        }
    }
}

/// The value of the sample line `series` (exact name and labels) in Prometheus text.
pub fn metric_value(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.split_whitespace().next()?.parse().ok())
}

/// `getconf CLK_TCK` (100 on Linux almost everywhere).
fn clock_ticks() -> u64 {
    static TICKS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok()?.trim().parse().ok())
            .unwrap_or(100)
    })
}

/// `du -s -B1 dir`: bytes allocated on disk, and `du -s -b dir`: apparent bytes.
pub fn du(dir: &Path) -> Result<(u64, u64), String> {
    let run = |flag: &str| -> Result<u64, String> {
        let out = Command::new("du").arg("-s").arg(flag).arg(dir).output().map_err(|e| format!("du: {e}"))?;
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .next()
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| format!("du {flag} {}: {}", dir.display(), String::from_utf8_lossy(&out.stderr)))
    };
    Ok((run("-B1")?, run("-b")?))
}

/// User + system CPU seconds process `pid` has used so far (all its threads).
pub fn cpu_seconds_of(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / clock_ticks() as f64)
}

/// A process's peak resident set size so far (`VmHWM`), in KiB.
pub fn peak_rss_kib_of(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// CPU seconds (user + system) of this process's waited-for children (`cutime` + `cstime`).
pub fn children_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    let ticks: u64 = f.get(13)?.parse::<u64>().ok()? + f.get(14)?.parse::<u64>().ok()?;
    Some(ticks as f64 / clock_ticks() as f64)
}

/// Finds `name` on `PATH`.
pub fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?.to_str()?.split(':').map(|d| Path::new(d).join(name)).find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_kinds_by_name() {
        for k in Kind::ALL {
            assert_eq!(Kind::parse(k.short()), Some(k));
        }
        assert_eq!(
            parse_servers("rtsd-hbase, opentsdb").unwrap(),
            [Kind::RtsdHbase, Kind::OpenTsdb],
            "spaces after commas are fine"
        );
        assert_eq!(parse_servers("rtsd,rtsd-hbase").unwrap(), [Kind::Rtsd, Kind::RtsdHbase]);
        assert_eq!(parse_servers("rtsd,vm,opentsdb").unwrap(), [Kind::Rtsd, Kind::Vm, Kind::OpenTsdb]);
        assert!(parse_servers("rtsd,hbase").unwrap_err().contains("unknown server \"hbase\""));
        assert!(parse_servers("rtsd-hbase,rtsd-hbase").unwrap_err().contains("twice"));
        assert!(parse_servers("").is_err());
        assert!(Kind::RtsdHbase.on_hbase() && Kind::OpenTsdb.on_hbase() && !Kind::Rtsd.on_hbase());
        assert!(Kind::RtsdHbase.opentsdb_api() && !Kind::Vm.opentsdb_api());
    }

    #[test]
    fn rtsd_goes_on_the_test_bed_it_was_told() {
        let up = "zk_quorum=127.0.0.1:40123\n";
        assert_eq!(parse_zk_quorum(up).as_deref(), Some("127.0.0.1:40123"));
        assert_eq!(parse_zk_quorum("zk_quorum=\n"), None);
        assert_eq!(parse_zk_quorum("hbase-cluster: cluster up in 80s\n"), None);
        assert_eq!(
            rtsd_hbase_args("127.0.0.1:40123"),
            ["--set", "rtsd.storage.engine=hbase", "--set", "tsd.storage.hbase.zk_quorum=127.0.0.1:40123"]
        );
        // start_with_args cannot start rtsd-on-HBase (it needs the scripts too), and says so.
        let e = Server::start(Kind::RtsdHbase, Path::new("/nonexistent/rtsd"), Path::new("/nonexistent"))
            .err()
            .expect("refused");
        assert!(e.contains("start_rtsd_hbase"), "{e}");
    }

    #[test]
    fn reads_sample_lines() {
        let text = "# HELP x\nvm_rows_inserted_total{type=\"opentsdb\"} 1234\nvm_rows_inserted_total{type=\"opentsdbhttp\"} 5\nrtsd_datapoints_added_total{protocol=\"telnet\"} 1.5e+06\n";
        assert_eq!(metric_value(text, r#"vm_rows_inserted_total{type="opentsdb"}"#), Some(1234.0));
        assert_eq!(metric_value(text, r#"vm_rows_inserted_total{type="opentsdbhttp"}"#), Some(5.0));
        assert_eq!(metric_value(text, r#"rtsd_datapoints_added_total{protocol="telnet"}"#), Some(1.5e6));
        assert_eq!(metric_value(text, r#"rtsd_datapoints_added_total{protocol="http"}"#), None);
    }
}
