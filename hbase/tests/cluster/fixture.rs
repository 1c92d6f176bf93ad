//! The cluster the tests run against: `scripts/hbase-cluster up` under a temporary directory, stopped (`down`, by
//! the PIDs it recorded) when the fixture drops, and by a detached watcher if this process dies first.
//!
//! `RTSD_HBASE_TEST_CLUSTER=DIR` reuses a cluster already started with `scripts/hbase-cluster up DIR` (and leaves
//! it running): quick iterations while developing. Tables get a per-run suffix so runs do not collide.
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Mutex;
use std::time::Instant;

pub struct Cluster {
    dir: PathBuf,
    _tmp: Option<tempfile::TempDir>,
    pub zk: String,
    owned: bool,
    /// `HBaseTool serve`, started on first use: one JVM start for all the test's admin commands.
    tool: Mutex<Option<Tool>>,
}

struct Tool {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_path_buf()
}

fn run(cmd: &mut Command, what: &str) -> String {
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

impl Cluster {
    pub fn start() -> Cluster {
        if let Ok(dir) = std::env::var("RTSD_HBASE_TEST_CLUSTER") {
            let dir = PathBuf::from(dir);
            let env = std::fs::read_to_string(dir.join("cluster.env")).expect("cluster.env of the reused cluster");
            let zk = env.lines().find_map(|l| l.strip_prefix("zk_quorum=")).expect("zk_quorum").to_string();
            return Cluster { dir, _tmp: None, zk, owned: false, tool: Mutex::new(None) };
        }
        let tmp = tempfile::Builder::new().prefix("rtsd-hbase-client-").tempdir().expect("temp dir");
        let dir = tmp.path().to_path_buf();
        let watch = format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 2; done; '{root}/scripts/hbase-cluster' down '{d}'; rm -rf '{d}'",
            pid = std::process::id(),
            root = root().display(),
            d = dir.display(),
        );
        // Detached on purpose: it outlives an aborted test binary to stop the cluster; never waited on.
        #[allow(clippy::zombie_processes)]
        Command::new("setsid")
            .args(["bash", "-c", &watch, "rtsd-hbase-test-watch"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the watcher");
        let t0 = Instant::now();
        let mut c = Cluster { dir, _tmp: Some(tmp), zk: String::new(), owned: true, tool: Mutex::new(None) };
        let up = c.script(&["up"]);
        c.zk = up.lines().find_map(|l| l.strip_prefix("zk_quorum=")).expect("zk_quorum= line").trim().to_string();
        eprintln!("cluster: up in {:.0?} ({})", t0.elapsed(), c.zk);
        c
    }

    /// `scripts/hbase-cluster CMD DIR ARGS...`
    pub fn script(&self, args: &[&str]) -> String {
        let path = root().join("scripts/hbase-cluster");
        let mut cmd = Command::new(&path);
        cmd.arg(args[0]).arg(&self.dir).args(&args[1..]);
        run(&mut cmd, &format!("hbase-cluster {}", args.join(" ")))
    }

    /// Runs one `HBaseTool` command (create, split, move, merge, regions...) against this cluster; its output.
    pub fn tool(&self, args: &[&str]) -> String {
        let mut slot = self.tool.lock().unwrap_or_else(|p| p.into_inner());
        let tool = slot.get_or_insert_with(|| self.start_tool());
        writeln!(tool.stdin, "{}", args.join(" ")).expect("write to HBaseTool");
        tool.stdin.flush().expect("flush to HBaseTool");
        let mut out = String::new();
        loop {
            let mut line = String::new();
            let n = tool.stdout.read_line(&mut line).expect("read from HBaseTool");
            assert!(n > 0, "HBaseTool exited during {args:?}; output so far: {out}");
            if line.starts_with("HBaseTool: done") {
                return out;
            }
            if let Some(why) = line.strip_prefix("HBaseTool: failed") {
                panic!("HBaseTool {args:?} failed:{why}");
            }
            out.push_str(&line);
        }
    }

    fn start_tool(&self) -> Tool {
        let cp = std::fs::read_to_string(self.dir.join("hbase.cp")).expect("hbase.cp");
        let mut child = Command::new("java")
            .args(["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.net.preferIPv4Stack=true"])
            .arg(format!("-Dlogfile={}/logs/tool.log", self.dir.display()))
            .arg("-cp")
            .arg(format!("{}/conf:{}", self.dir.display(), cp.trim()))
            .arg(root().join("compat-tests/hbase/HBaseTool.java"))
            .arg("serve")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start HBaseTool serve");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Tool { child, stdin, stdout }
    }

    /// The `rsN` (1..3) serving `host:port`.
    pub fn rs_number(&self, server: &str) -> usize {
        let env = std::fs::read_to_string(self.dir.join("cluster.env")).expect("cluster.env");
        let port = server.rsplit(':').next().unwrap();
        (1..=3)
            .find(|n| env.lines().any(|l| l == format!("rs{n}_port={port}")))
            .unwrap_or_else(|| panic!("{server} is none of the region servers:\n{env}"))
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Some(mut tool) = self.tool.lock().unwrap_or_else(|p| p.into_inner()).take() {
            // Closing its stdin ends the serve loop; the kill (by this child's PID) covers a hung one.
            drop(tool.stdin);
            let _ = tool.child.kill();
            let _ = tool.child.wait();
        }
        if self.owned {
            let _ = Command::new(root().join("scripts/hbase-cluster")).arg("down").arg(&self.dir).status();
        }
    }
}
