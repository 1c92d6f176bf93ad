//! The HBase test bed (README "Test bed: HBase and OpenTSDB 2.4.1"), shared by the tests that need the real
//! OpenTSDB 2.4.1: a real HBase cluster (`scripts/hbase-cluster`, ZooKeeper + HMaster + 3 region servers) and the
//! real TSD on it (`scripts/opentsdb-ref`), under one temporary directory.
//!
//! [`Testbed::start`] starts both (about a minute on two cores, so a test binary starts it once) and a detached
//! watcher that stops the cluster and removes its directory if the test binary dies first. Dropping the
//! [`Testbed`] (also while a check panics) stops both; a panicking test gets the log tails printed.
//!
//! Java 17, Maven and Maven Central are required (`scripts/install-test-deps`); without them the test fails with
//! what is missing. It never skips.
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::{Daemon, HttpConn, Response};

/// The workspace root (where `scripts/` lives).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_path_buf()
}

/// Runs a test-bed script; panics with its output when it fails. Returns stdout.
pub fn script(name: &str, args: &[&str]) -> String {
    script_env(name, args, &[])
}

/// [`script`] with extra environment variables.
pub fn script_env(name: &str, args: &[&str], env: &[(&str, &str)]) -> String {
    let mut cmd = Command::new(root().join("scripts").join(name));
    cmd.args(args).envs(env.iter().copied());
    run_checked(cmd, &format!("{name} {}", args.join(" ")))
}

/// Runs `cmd` (stdin closed) to its end; panics with its output, naming it `what`, when it fails. Returns stdout.
fn run_checked(mut cmd: Command, what: &str) -> String {
    let out = cmd.stdin(Stdio::null()).output().unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Fails with instructions when a tool the test bed needs is missing.
pub fn require_tools() {
    for (tool, arg) in [("java", "-version"), ("mvn", "-v"), ("python3", "-V"), ("curl", "--version")] {
        let ok = Command::new(tool).arg(arg).stdout(Stdio::null()).stderr(Stdio::null()).status();
        assert!(
            matches!(ok, Ok(s) if s.success()),
            "the HBase test bed needs `{tool}` (a JDK 17, Maven with access to Maven Central, python3, curl): \
             run scripts/install-test-deps"
        );
    }
}

/// Whether `pid` is a live (not zombie) process.
pub fn pid_running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // A zombie has exited; only its parent's wait is missing.
        Ok(stat) => stat.rsplit(')').next().and_then(|s| s.split_whitespace().next()) != Some("Z"),
        Err(_) => false,
    }
}

/// Processes whose command line mentions `dir` (the JVMs get their config and log paths from it).
pub fn processes_mentioning(dir: &Path) -> Vec<(u32, String)> {
    let needle = dir.to_string_lossy().into_owned();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("read /proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        if pid == std::process::id() {
            continue;
        }
        let Ok(raw) = std::fs::read(entry.path().join("cmdline")) else { continue };
        let cmdline = String::from_utf8_lossy(&raw).replace('\0', " ");
        // The watcher's own command line names the dir too; it is ours and exits with this process.
        if cmdline.contains(&needle) && !cmdline.contains("rtsd-testbed-watch") && pid_running(pid) {
            found.push((pid, cmdline.chars().take(200).collect()));
        }
    }
    found
}

/// The cluster and the reference TSD under one temporary directory. Dropping it (also while a check panics) stops
/// both; the watcher covers an abort.
pub struct Testbed {
    dir: tempfile::TempDir,
    /// The reference TSD's address (telnet and HTTP on one port, as 2.4 serves them).
    pub tsd: SocketAddr,
    down: bool,
    /// The name log lines are prefixed with (the test binary's).
    label: &'static str,
    /// The extra opentsdb.conf lines the TSD started with (again on a restart).
    tsd_conf: String,
}

impl Testbed {
    /// Starts the cluster and the reference TSD; `label` prefixes the progress and failure output.
    pub fn start(label: &'static str) -> Testbed {
        Testbed::start_with(label, &[])
    }

    /// [`Testbed::start`] with extra properties for the reference TSD's opentsdb.conf (e.g. the compaction
    /// queue's `tsd.storage.compaction.*`), appended after the ones that mirror rtsd.conf.
    pub fn start_with(label: &'static str, tsd_conf: &[(&str, &str)]) -> Testbed {
        let started = Instant::now();
        let tsd_conf: String = tsd_conf.iter().map(|(k, v)| format!("{k} = {v}\n")).collect();
        let mut tb = Testbed::start_cluster(label);
        tb.tsd_conf = tsd_conf;
        tb.start_tsd();
        eprintln!("{label}: reference TSD on port {} after {}s", tb.tsd.port(), started.elapsed().as_secs());
        tb
    }

    /// The cluster alone, without a reference TSD ([`Testbed::tsd`] is port 0): for rtsd nodes on HBase only.
    pub fn start_cluster(label: &'static str) -> Testbed {
        require_tools();
        let dir = tempfile::Builder::new().prefix("rtsd-hbase-").tempdir().expect("temp dir");
        let d = dir.path().to_string_lossy().into_owned();
        // The watcher: once this test process is gone, stop everything under the dir and remove it.
        let watch = format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 2; done; '{root}/scripts/opentsdb-ref' down '{d}'; \
             '{root}/scripts/hbase-cluster' down '{d}'; rm -rf '{d}'",
            pid = std::process::id(),
            root = root().display(),
        );
        // Detached on purpose: it outlives this process to clean up after an abort, so it is never waited on.
        #[allow(clippy::zombie_processes)]
        let _watcher = Command::new("setsid")
            .args(["bash", "-c", &watch, "rtsd-testbed-watch"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the test bed watcher");
        let started = Instant::now();
        // From here on a panic (a script failing) drops the Testbed, which stops whatever did start.
        let tb =
            Testbed { dir, tsd: SocketAddr::from(([127, 0, 0, 1], 0)), down: false, label, tsd_conf: String::new() };
        let up = script("hbase-cluster", &["up", &d]);
        assert!(up.lines().any(|l| l.starts_with("zk_quorum=127.0.0.1:")), "no zk_quorum line in {up:?}");
        eprintln!("{label}: cluster up in {}s", started.elapsed().as_secs());
        tb
    }

    fn start_tsd(&mut self) {
        let d = self.dir().to_string();
        let tsd = script_env("opentsdb-ref", &["up", &d], &[("OPENTSDB_REF_EXTRA_CONF", &self.tsd_conf)]);
        let port: u16 = tsd
            .lines()
            .find_map(|l| l.strip_prefix("port="))
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| panic!("no port= line in {tsd:?}"));
        self.tsd = SocketAddr::from(([127, 0, 0, 1], port));
    }

    /// Stops the reference TSD gracefully and starts it again (on a new port, [`Testbed::tsd`]). 2.4.1's shutdown
    /// compacts every queued row of a closed hour (`CompactionQueue.flush()`): with
    /// `tsd.storage.compaction.min_flush_threshold` set high, that is when closed hours get compacted, once all
    /// their cells are in HBase.
    pub fn restart_tsd(&mut self) {
        script("opentsdb-ref", &["down", self.dir()]);
        self.start_tsd();
    }

    /// The cluster's ZooKeeper quorum (`host:port`), as `scripts/hbase-cluster up` wrote it to `cluster.env`.
    pub fn zk_quorum(&self) -> String {
        let env = std::fs::read_to_string(self.path().join("cluster.env")).expect("cluster.env");
        env.lines()
            .find_map(|l| l.strip_prefix("zk_quorum="))
            .unwrap_or_else(|| panic!("no zk_quorum in cluster.env:\n{env}"))
            .trim()
            .to_string()
    }

    /// The properties that put an rtsd on this cluster's tables (`rtsd.storage.engine=hbase`), with the
    /// reference's layout settings ([`Testbed::rtsd_settings`]).
    pub fn rtsd_on_hbase_settings(&self) -> Vec<(String, String)> {
        let mut settings = self.rtsd_settings();
        settings.push(("rtsd.storage.engine".into(), "hbase".into()));
        settings.push(("tsd.storage.hbase.zk_quorum".into(), self.zk_quorum()));
        settings
    }

    /// An rtsd node on this cluster ([`Testbed::rtsd_on_hbase_settings`]) with `extra` properties on top. Its own
    /// rollups (`rtsd.rollups.auto`) are off unless `extra` turns them on: they go into the rollup tables' `a`
    /// families, which the checks comparing with OpenTSDB do not read.
    pub fn start_rtsd(&self, extra: &[(&str, &str)]) -> Daemon {
        let mut settings = self.rtsd_on_hbase_settings();
        settings.push(("rtsd.rollups.auto".into(), "false".into()));
        settings.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        Daemon::start_with(&settings.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect::<Vec<_>>())
    }

    /// Runs one `compat-tests/hbase/HBaseTool.java` command (e.g. `create TABLE FAMILIES`) against the cluster in a
    /// JVM of its own; returns its stdout.
    pub fn hbase_tool(&self, args: &[&str]) -> String {
        hbase_tool_in(self.path(), args)
    }

    /// Runs several HBaseTool commands in one JVM (`HBaseTool serve`: the JVM's start and its connection are paid
    /// once), one after the other; returns each one's output. Panics naming the first that fails.
    pub fn hbase_tool_each(&self, commands: &[&[&str]]) -> Vec<String> {
        let mut child = hbase_tool_java(self.path())
            .arg("serve")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start HBaseTool serve");
        {
            use std::io::Write;
            let mut stdin = child.stdin.take().expect("piped stdin");
            for args in commands {
                writeln!(stdin, "{}", args.join(" ")).expect("write an HBaseTool command");
            }
            // Closing stdin ends the serve loop after the last command.
        }
        let out = child.wait_with_output().expect("wait for HBaseTool serve");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let mut outputs = Vec::new();
        let mut current = String::new();
        for line in stdout.lines() {
            if line == "HBaseTool: done" {
                outputs.push(std::mem::take(&mut current));
            } else if let Some(why) = line.strip_prefix("HBaseTool: failed ") {
                panic!("HBaseTool {} failed: {why}", commands[outputs.len()].join(" "));
            } else {
                current.push_str(line);
                current.push('\n');
            }
        }
        assert_eq!(
            outputs.len(),
            commands.len(),
            "HBaseTool serve ran {} of {} commands ({}):\n{stdout}\n{}",
            outputs.len(),
            commands.len(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        outputs
    }

    /// The test bed's directory, as a string for the scripts' arguments.
    pub fn dir(&self) -> &str {
        self.dir.path().to_str().expect("UTF-8 temp dir")
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// One request on a fresh connection to the reference TSD, `Content-Type: application/json` when there is a
    /// body.
    pub fn http(&self, method: &str, path: &str, body: &str, timeout: Duration) -> Response {
        let mut conn = HttpConn::new(self.tsd);
        conn.stream().set_read_timeout(Some(timeout)).expect("set read timeout");
        let headers: &[(&str, &str)] = if body.is_empty() { &[] } else { &[("Content-Type", "application/json")] };
        conn.request(method, path, headers, body.as_bytes())
    }

    /// Runs one of OpenTSDB 2.4.1's command-line tools (`scripts/opentsdb-ref tool`, e.g.
    /// `net.opentsdb.tools.DumpSeries` for `tsdb scan`) against the test bed; returns its stdout. `TZ=UTC`: the
    /// tools print dates with the JVM's default time zone, rtsd's tools in UTC.
    pub fn tool(&self, class: &str, args: &[&str]) -> String {
        self.try_tool(class, args).unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`Testbed::tool`], with its failure (the tool's output and exception) as the error.
    pub fn try_tool(&self, class: &str, args: &[&str]) -> Result<String, String> {
        let out = Command::new(root().join("scripts/opentsdb-ref"))
            .args(["tool", self.dir(), class])
            .args(args)
            .env("TZ", "UTC")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run scripts/opentsdb-ref: {e}"))?;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        if !out.status.success() {
            let tail: Vec<&str> = stdout.lines().rev().take(5).collect();
            return Err(format!(
                "opentsdb-ref tool {class} {} failed ({}): ...{:?}\n{}",
                args.join(" "),
                out.status,
                tail,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(stdout)
    }

    /// The properties of the reference's own opentsdb.conf that change what the compared requests answer, for an
    /// rtsd started beside it (`--set`), so both run the same configuration.
    pub fn rtsd_settings(&self) -> Vec<(String, String)> {
        let conf = std::fs::read_to_string(self.path().join("tsd/opentsdb.conf")).expect("reference opentsdb.conf");
        let wanted = [
            "tsd.core.auto_create_metrics",
            "tsd.core.auto_create_tagks",
            "tsd.core.auto_create_tagvs",
            "tsd.storage.fix_duplicates",
            "tsd.storage.max_tags",
            "tsd.storage.uid.width.metric",
            "tsd.storage.uid.width.tagk",
            "tsd.storage.uid.width.tagv",
            "tsd.storage.salt.width",
            "tsd.storage.salt.buckets",
            "tsd.rollups.enable",
            "tsd.rollups.config",
            "tsd.core.enable_api",
            "tsd.no_diediedie",
            "tsd.http.query.allow_delete",
            "tsd.rpc.telnet.return_errors",
            "tsd.http.request.enable_chunked",
        ];
        conf.lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .filter(|(k, _)| wanted.contains(&k.as_str()))
            .collect()
    }

    /// The PIDs the scripts recorded: ZooKeeper, master, region servers, TSD.
    pub fn recorded_pids(&self) -> Vec<(String, u32)> {
        let mut pids = Vec::new();
        for (dir, ext) in [(self.dir.path().join("pids"), "pid"), (self.dir.path().join("tsd"), "pid")] {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.extension().and_then(|e| e.to_str()) == Some(ext) {
                    let pid = std::fs::read_to_string(&path).ok().and_then(|s| s.trim().parse().ok());
                    if let Some(pid) = pid {
                        pids.push((path.file_stem().unwrap().to_string_lossy().into_owned(), pid));
                    }
                }
            }
        }
        pids.sort();
        pids
    }

    /// Stops the TSD and the cluster (`down`), failing when a script fails.
    pub fn stop(&mut self) {
        if !self.down {
            self.down = true;
            script("opentsdb-ref", &["down", self.dir()]);
            script("hbase-cluster", &["down", self.dir()]);
        }
    }

    /// The last lines of the master's, the region servers' and the TSD's logs.
    pub fn log_tails(&self) -> String {
        let mut out = String::new();
        for name in ["logs/master.log", "logs/rs1.log", "logs/rs2.log", "logs/rs3.log", "tsd/tsd.log"] {
            let text = std::fs::read_to_string(self.dir.path().join(name)).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            out.push_str(&format!("--- {name} (last 15 lines)\n"));
            for l in &lines[lines.len().saturating_sub(15)..] {
                out.push_str(l);
                out.push('\n');
            }
        }
        out
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("{}: failed; logs under {}:\n{}", self.label, self.dir(), self.log_tails());
        }
        if !self.down {
            self.down = true;
            let d = self.dir().to_string();
            for (name, cmd) in [("opentsdb-ref", "down"), ("hbase-cluster", "down")] {
                let _ = Command::new(root().join("scripts").join(name)).args([cmd, &d]).status();
            }
        }
    }
}

/// Runs one `compat-tests/hbase/HBaseTool.java` command against the cluster `scripts/hbase-cluster up` started in
/// `dir`, in a JVM of its own; returns its stdout.
pub fn hbase_tool_in(dir: &Path, args: &[&str]) -> String {
    let mut cmd = hbase_tool_java(dir);
    cmd.args(args);
    run_checked(cmd, &format!("HBaseTool {}", args.join(" ")))
}

/// `java ... HBaseTool.java` against the cluster in `dir` (its conf dir first on the classpath), before the command.
fn hbase_tool_java(dir: &Path) -> Command {
    let cp = std::fs::read_to_string(dir.join("hbase.cp")).expect("hbase.cp");
    let mut cmd = Command::new("java");
    cmd.args(["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.net.preferIPv4Stack=true"])
        .arg(format!("-Dlogfile={}/logs/tool.log", dir.display()))
        .arg("-cp")
        .arg(format!("{}/conf:{}", dir.display(), cp.trim()))
        .arg(root().join("compat-tests/hbase/HBaseTool.java"));
    cmd
}

/// Every point of a `/api/query` answer grouped by `host` (`m=...{host=*}`): (host, timestamp) -> value; the
/// status and body when the answer is not a 200.
pub fn points_by_host(addr: SocketAddr, path: &str) -> Result<BTreeMap<(String, i64), f64>, (u16, String)> {
    let mut conn = HttpConn::new(addr);
    conn.stream().set_read_timeout(Some(Duration::from_secs(120))).expect("set read timeout");
    let r = conn.request("GET", path, &[], b"");
    if r.status != 200 {
        return Err((r.status, r.text()));
    }
    let answer = r.json();
    let mut points = BTreeMap::new();
    for series in answer.as_array().unwrap_or_else(|| panic!("{path}: not an array: {answer}")) {
        let host = series["tags"]["host"].as_str().unwrap_or_else(|| panic!("{path}: no host tag: {series}"));
        for (t, v) in series["dps"].as_object().unwrap_or_else(|| panic!("{path}: no dps: {series}")) {
            points.insert((host.to_string(), t.parse().expect("timestamp")), v.as_f64().expect("value"));
        }
    }
    Ok(points)
}

/// Waits until `f` returns true or `timeout` passes; true when it did.
pub fn wait_for(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let started = Instant::now();
    loop {
        if f() {
            return true;
        }
        if started.elapsed() >= timeout {
            return false;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}
