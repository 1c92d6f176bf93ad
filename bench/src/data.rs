//! Data sets A and B of `shared/spec/performance.md`, rendered to wire bytes before any clock starts.
//!
//! A line looks like `put sys.cpu.user 1795302480 58.97 host=host00000 dc=dc0 env=prod`:
//! * metrics `sys.<group>.<field>` (metric index `m`: group `m / 10`, field `m % 10`), tags `host`, `dc`, `env`;
//! * timestamps in seconds, 10 s apart per round, the last round about two minutes before now (old enough that
//!   VictoriaMetrics' 30 s `-search.latencyOffset` does not hide the newest buckets from q1);
//! * values by `m % 4`: 0 a float gauge random walk in 0..100 with 2 decimals, 1 an integer counter growing by
//!   0..5000 per round, 2 a small integer gauge (0..20) that changes in ~10% of rounds, 3 an independent random
//!   float with 3 decimals;
//! * order: round, then host, then metric; connection `c` of `K` carries the hosts `h` with `h % K == c`.
//!
//! Every series has its own random stream seeded by `(host, metric)`, so the bytes do not depend on `K` and the
//! expected answer to a query can be recomputed here ([`DataSet::expected_sum_of_avgs`]).

/// One of the spec's data sets, possibly scaled down.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataSet {
    /// `A` or `B`.
    pub name: &'static str,
    pub metrics: u32,
    pub hosts: u32,
    pub rounds: u32,
    /// Timestamp (seconds) of the last round.
    pub last_ts: i64,
    /// Put before every metric name, tag key and tag value: "" for the spec's names; another prefix gives a set
    /// of the same shape whose names are all new to a server that stored the first ([`DataSet::renamed`]).
    pub names: &'static str,
}

/// Seconds between rounds.
pub const STEP_S: i64 = 10;

const GROUPS: [(&str, [&str; 10]); 10] = [
    ("cpu", ["user", "system", "iowait", "idle", "nice", "irq", "softirq", "steal", "guest", "ctxt"]),
    ("mem", ["used", "free", "cached", "buffers", "shared", "active", "inactive", "dirty", "slab", "mapped"]),
    ("disk", ["reads", "writes", "read_bytes", "write_bytes", "read_ms", "write_ms", "io_ms", "queue", "util", "free"]),
    (
        "net",
        [
            "rx_bytes",
            "tx_bytes",
            "rx_packets",
            "tx_packets",
            "rx_errors",
            "tx_errors",
            "rx_drops",
            "tx_drops",
            "collisions",
            "multicast",
        ],
    ),
    ("load", ["1m", "5m", "15m", "running", "total", "forks", "blocked", "procs", "threads", "uptime"]),
    ("proc", ["count", "running", "sleeping", "zombie", "stopped", "threads", "fds", "rss", "vsz", "cpu"]),
    ("fs", ["used", "free", "inodes_used", "inodes_free", "files", "dirs", "reads", "writes", "opens", "closes"]),
    ("swap", ["used", "free", "in", "out", "cached", "total", "pgin", "pgout", "faults", "majfaults"]),
    ("io", ["await", "svctm", "rqm_r", "rqm_w", "avgrq", "avgqu", "r_s", "w_s", "util", "tps"]),
    (
        "tcp",
        [
            "established",
            "syn_sent",
            "syn_recv",
            "fin_wait",
            "time_wait",
            "close_wait",
            "listen",
            "retrans",
            "resets",
            "orphans",
        ],
    ),
];

/// The name of metric `m` (`m < 100`): `sys.cpu.user` for 0.
pub fn metric_name(m: u32) -> String {
    let (group, fields) = GROUPS[(m / 10) as usize % GROUPS.len()];
    format!("sys.{group}.{}", fields[(m % 10) as usize])
}

/// The `host` tag value of host `h`: `host00042`.
pub fn host_name(h: u32) -> String {
    format!("host{h:05}")
}

/// The `dc` tag value of host `h`.
pub fn dc_name(h: u32) -> String {
    format!("dc{}", h % 4)
}

/// The `env` tag value (one value: the spec's example).
pub const ENV: &str = "prod";

/// A value as the client sends it: an integer, or a decimal with a fixed number of decimals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Val {
    Int(i64),
    /// `units / 10^decimals`, rendered with exactly `decimals` digits after the point.
    Fixed {
        units: i64,
        decimals: u8,
    },
}

impl Val {
    pub fn as_f64(self) -> f64 {
        match self {
            Val::Int(v) => v as f64,
            Val::Fixed { units, decimals } => units as f64 / 10f64.powi(decimals as i32),
        }
    }

    /// Appends the value's text (`58.97`, `1234`, `0.050`).
    pub fn push(self, out: &mut Vec<u8>) {
        match self {
            Val::Int(v) => push_i64(out, v),
            Val::Fixed { units, decimals } => {
                let scale = 10i64.pow(decimals as u32);
                if units < 0 {
                    out.push(b'-');
                }
                let u = units.unsigned_abs();
                push_u64(out, u / scale as u64);
                out.push(b'.');
                let frac = u % scale as u64;
                let mut digits = [b'0'; 20];
                let mut f = frac;
                for i in (0..decimals as usize).rev() {
                    digits[i] = b'0' + (f % 10) as u8;
                    f /= 10;
                }
                out.extend_from_slice(&digits[..decimals as usize]);
            }
        }
    }
}

/// Appends the decimal text of `v`.
pub fn push_u64(out: &mut Vec<u8>, mut v: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

/// Appends the decimal text of `v`, with a `-` when negative.
pub fn push_i64(out: &mut Vec<u8>, v: i64) {
    if v < 0 {
        out.push(b'-');
    }
    push_u64(out, v.unsigned_abs());
}

fn splitmix64(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// One series' random stream and current value.
#[derive(Debug, Clone)]
pub struct Series {
    rng: u64,
    kind: u32,
    value: i64,
    started: bool,
}

impl Series {
    /// The series of metric `m` on host `h`.
    pub fn new(h: u32, m: u32) -> Series {
        let rng = 0x5EED_0000_0000_0000u64 ^ ((h as u64) << 16) ^ m as u64;
        Series { rng, kind: m % 4, value: 0, started: false }
    }

    fn next_u64(&mut self) -> u64 {
        splitmix64(&mut self.rng)
    }

    /// The value of the next round.
    pub fn next_value(&mut self) -> Val {
        let first = !self.started;
        self.started = true;
        match self.kind {
            0 => {
                // Random walk in hundredths over 0..=100.00, reflected at the ends.
                if first {
                    self.value = (self.next_u64() % 10_001) as i64;
                } else {
                    let step = (self.next_u64() % 401) as i64 - 200;
                    let mut v = self.value + step;
                    if v < 0 {
                        v = -v;
                    }
                    if v > 10_000 {
                        v = 20_000 - v;
                    }
                    self.value = v;
                }
                Val::Fixed { units: self.value, decimals: 2 }
            }
            1 => {
                if first {
                    self.value = (self.next_u64() % 1_000_000) as i64;
                } else {
                    self.value += (self.next_u64() % 5_001) as i64;
                }
                Val::Int(self.value)
            }
            2 => {
                let r = self.next_u64();
                if first || r.is_multiple_of(10) {
                    self.value = ((r >> 8) % 21) as i64;
                }
                Val::Int(self.value)
            }
            _ => Val::Fixed { units: (self.next_u64() % 100_001) as i64, decimals: 3 },
        }
    }
}

/// Where the last round of a data set starting now should fall: two minutes ago, at `:50` of a minute so that a
/// data set whose round count is a multiple of 6 covers whole minutes (q1's 1-minute buckets all have 6 points).
pub fn default_last_ts(now_s: i64) -> i64 {
    now_s - now_s.rem_euclid(60) - 130
}

impl DataSet {
    /// Data set A (100 metrics x 1000 hosts x 100 rounds); `scale` multiplies the rounds (at least 2).
    pub fn a(scale: f64, hosts: Option<u32>, last_ts: i64) -> DataSet {
        let rounds = ((100.0 * scale).round() as u32).max(2);
        DataSet { name: "A", metrics: 100, hosts: hosts.unwrap_or(1000), rounds, last_ts, names: "" }
    }

    /// Data set B (4 metrics x 1000 hosts x 8640 rounds, one day); `scale` multiplies the rounds, rounded up to
    /// whole minutes.
    pub fn b(scale: f64, hosts: Option<u32>, last_ts: i64) -> DataSet {
        let rounds = ((8640.0 * scale).round() as u32).max(6).div_ceil(6) * 6;
        DataSet { name: "B", metrics: 4, hosts: hosts.unwrap_or(1000), rounds, last_ts, names: "" }
    }

    /// The same set with every metric name, tag key and tag value prefixed by `names`: as many new UIDs and series
    /// as the set itself, on a server that already stored it.
    pub fn renamed(&self, names: &'static str) -> DataSet {
        DataSet { names, ..self.clone() }
    }

    /// The telnet put line's start up to its timestamp, of metric `m`.
    fn telnet_metric(&self, m: u32) -> Vec<u8> {
        format!("put {}{} ", self.names, metric_name(m)).into_bytes()
    }

    /// The telnet put line's tags (and newline) of host `h`.
    fn telnet_tags(&self, h: u32) -> Vec<u8> {
        let n = self.names;
        format!(" {n}host={n}{} {n}dc={n}{} {n}env={n}{ENV}\n", host_name(h), dc_name(h)).into_bytes()
    }

    /// A JSON point's start up to its timestamp, of metric `m`.
    fn json_metric(&self, m: u32) -> Vec<u8> {
        format!("{{\"metric\":\"{}{}\",\"timestamp\":", self.names, metric_name(m)).into_bytes()
    }

    /// A JSON point's tags (and closing brace) of host `h`.
    fn json_tags(&self, h: u32) -> Vec<u8> {
        let n = self.names;
        format!(
            ",\"tags\":{{\"{n}host\":\"{n}{}\",\"{n}dc\":\"{n}{}\",\"{n}env\":\"{n}{ENV}\"}}}}",
            host_name(h),
            dc_name(h)
        )
        .into_bytes()
    }

    /// `data set A = 100 metrics x 1000 hosts x 100 rounds = 10000000 points (100000 series)`.
    pub fn describe(&self) -> String {
        format!(
            "data set {} = {} metrics x {} hosts x {} rounds = {} points ({} series)",
            self.name,
            self.metrics,
            self.hosts,
            self.rounds,
            self.points(),
            self.series()
        )
    }

    pub fn points(&self) -> u64 {
        self.metrics as u64 * self.hosts as u64 * self.rounds as u64
    }

    pub fn series(&self) -> u64 {
        self.metrics as u64 * self.hosts as u64
    }

    pub fn first_ts(&self) -> i64 {
        self.ts(0)
    }

    /// Timestamp of round `r`.
    pub fn ts(&self, r: u32) -> i64 {
        self.last_ts - (self.rounds - 1 - r) as i64 * STEP_S
    }

    /// The hosts connection `c` of `conns` carries.
    pub fn hosts_of(&self, c: usize, conns: usize) -> impl Iterator<Item = u32> + '_ {
        (0..self.hosts).filter(move |h| *h as usize % conns == c)
    }

    /// Calls `f(metric, host, ts, value)` for every point of connection `c` of `conns`, in wire order.
    pub fn for_each_point(&self, c: usize, conns: usize, mut f: impl FnMut(u32, u32, i64, Val)) {
        let hosts: Vec<u32> = self.hosts_of(c, conns).collect();
        let mut series: Vec<Series> =
            hosts.iter().flat_map(|&h| (0..self.metrics).map(move |m| Series::new(h, m))).collect();
        for r in 0..self.rounds {
            let ts = self.ts(r);
            let mut s = series.iter_mut();
            for &h in &hosts {
                for m in 0..self.metrics {
                    let v = s.next().expect("one series per (host, metric)").next_value();
                    f(m, h, ts, v);
                }
            }
        }
    }

    /// The telnet bytes of each of `conns` connections: `put` lines, each ending in `\n`.
    pub fn render_telnet(&self, conns: usize) -> Vec<Vec<u8>> {
        let metric_prefix: Vec<Vec<u8>> = (0..self.metrics).map(|m| self.telnet_metric(m)).collect();
        let tag_suffix: Vec<Vec<u8>> = (0..self.hosts).map(|h| self.telnet_tags(h)).collect();
        let per_conn = (self.points() / conns as u64 + 1) as usize * 64;
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..conns)
                .map(|c| {
                    let (metric_prefix, tag_suffix) = (&metric_prefix, &tag_suffix);
                    scope.spawn(move || {
                        let mut out = Vec::with_capacity(per_conn);
                        let mut ts_text = Vec::new();
                        let mut last_ts = i64::MIN;
                        self.for_each_point(c, conns, |m, h, ts, v| {
                            if ts != last_ts {
                                last_ts = ts;
                                ts_text.clear();
                                push_i64(&mut ts_text, ts);
                                ts_text.push(b' ');
                            }
                            out.extend_from_slice(&metric_prefix[m as usize]);
                            out.extend_from_slice(&ts_text);
                            v.push(&mut out);
                            out.extend_from_slice(&tag_suffix[h as usize]);
                        });
                        out
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("render thread")).collect()
        })
    }

    /// The `/api/put` requests of each of `conns` connections: complete HTTP/1.1 requests (keep-alive) whose bodies
    /// are JSON arrays of `per_request` points (the last one of a connection may hold fewer).
    pub fn render_http(&self, conns: usize, per_request: usize) -> Vec<Vec<Vec<u8>>> {
        let metric_prefix: Vec<Vec<u8>> = (0..self.metrics).map(|m| self.json_metric(m)).collect();
        let tag_suffix: Vec<Vec<u8>> = (0..self.hosts).map(|h| self.json_tags(h)).collect();
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..conns)
                .map(|c| {
                    let (metric_prefix, tag_suffix) = (&metric_prefix, &tag_suffix);
                    scope.spawn(move || {
                        let mut requests = Vec::new();
                        let mut body: Vec<u8> = Vec::with_capacity(per_request * 130);
                        let mut in_body = 0usize;
                        self.for_each_point(c, conns, |m, h, ts, v| {
                            body.push(if in_body == 0 { b'[' } else { b',' });
                            body.extend_from_slice(&metric_prefix[m as usize]);
                            push_i64(&mut body, ts);
                            body.extend_from_slice(b",\"value\":");
                            v.push(&mut body);
                            body.extend_from_slice(&tag_suffix[h as usize]);
                            in_body += 1;
                            if in_body == per_request {
                                body.push(b']');
                                requests.push(http_put_request(&body));
                                body.clear();
                                in_body = 0;
                            }
                        });
                        if in_body > 0 {
                            body.push(b']');
                            requests.push(http_put_request(&body));
                        }
                        requests
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("render thread")).collect()
        })
    }

    /// What `sum:1m-avg:<metric 0>` answers over the whole data set, bucket start -> value: per host the mean of
    /// each minute's points, summed over the hosts (all of them, or only `host`).
    pub fn expected_sum_of_avgs(&self, hosts: Option<&[u32]>) -> Vec<(i64, f64)> {
        let hosts: Vec<u32> = match hosts {
            Some(h) => h.to_vec(),
            None => (0..self.hosts).collect(),
        };
        let mut buckets: std::collections::BTreeMap<i64, f64> = Default::default();
        for &h in &hosts {
            let mut s = Series::new(h, 0);
            let mut per_minute: std::collections::BTreeMap<i64, (f64, u32)> = Default::default();
            for r in 0..self.rounds {
                let ts = self.ts(r);
                let e = per_minute.entry(ts - ts.rem_euclid(60)).or_default();
                e.0 += s.next_value().as_f64();
                e.1 += 1;
            }
            for (b, (sum, n)) in per_minute {
                *buckets.entry(b).or_default() += sum / n as f64;
            }
        }
        buckets.into_iter().collect()
    }
}

/// A complete `POST /api/put` request around `body`.
pub fn http_put_request(body: &[u8]) -> Vec<u8> {
    let head = format!(
        "POST /api/put HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let mut req = Vec::with_capacity(head.len() + body.len());
    req.extend_from_slice(head.as_bytes());
    req.extend_from_slice(body);
    req
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> DataSet {
        DataSet { name: "A", metrics: 5, hosts: 7, rounds: 3, last_ts: 1_795_302_480, names: "" }
    }

    #[test]
    fn names() {
        assert_eq!(metric_name(0), "sys.cpu.user");
        assert_eq!(metric_name(3), "sys.cpu.idle");
        assert_eq!(metric_name(99), "sys.tcp.orphans");
        let all: std::collections::HashSet<String> = (0..100).map(metric_name).collect();
        assert_eq!(all.len(), 100);
        assert_eq!(host_name(42), "host00042");
    }

    #[test]
    fn a_renamed_set_has_every_name_prefixed_and_the_same_points() {
        let (set, warm) = (small(), small().renamed("w"));
        let first = |bytes: &[u8]| String::from_utf8(bytes.to_vec()).unwrap().lines().next().unwrap().to_string();
        let (t, tw) = (set.render_telnet(1), warm.render_telnet(1));
        let (line, value) = (first(&t[0]), first(&t[0]).split(' ').nth(3).unwrap().to_string());
        assert_eq!(line, format!("put sys.cpu.user 1795302460 {value} host=host00000 dc=dc0 env=prod"));
        assert_eq!(first(&tw[0]), format!("put wsys.cpu.user 1795302460 {value} whost=whost00000 wdc=wdc0 wenv=wprod"));
        assert_eq!(tw[0].len(), t[0].len() + 7 * set.points() as usize, "7 prefixes a line");
        let body = |r: &[u8]| {
            let s = String::from_utf8(r.to_vec()).unwrap();
            s[s.find("\r\n\r\n").unwrap() + 4..].to_string()
        };
        let (h, hw) = (set.render_http(1, 1000), warm.render_http(1, 1000));
        let (p, pw): (serde_json::Value, serde_json::Value) =
            (serde_json::from_str(&body(&h[0][0])).unwrap(), serde_json::from_str(&body(&hw[0][0])).unwrap());
        assert_eq!(pw[0]["metric"], format!("w{}", p[0]["metric"].as_str().unwrap()));
        assert_eq!(pw[0]["tags"], serde_json::json!({"whost": "whost00000", "wdc": "wdc0", "wenv": "wprod"}));
        assert_eq!(
            (pw[0]["timestamp"].clone(), pw[0]["value"].clone()),
            (p[0]["timestamp"].clone(), p[0]["value"].clone())
        );
        assert_eq!(pw.as_array().unwrap().len() as u64, set.points());
    }

    #[test]
    fn spec_sizes() {
        let a = DataSet::a(1.0, None, 0);
        assert_eq!((a.metrics, a.hosts, a.rounds, a.points()), (100, 1000, 100, 10_000_000));
        let b = DataSet::b(1.0, None, 0);
        assert_eq!((b.metrics, b.hosts, b.rounds, b.points()), (4, 1000, 8640, 34_560_000));
        assert_eq!(DataSet::b(0.05, None, 0).rounds % 6, 0);
    }

    #[test]
    fn last_ts_makes_whole_minutes() {
        let b = DataSet::b(0.01, None, default_last_ts(1_795_302_487));
        assert_eq!(b.first_ts().rem_euclid(60), 0);
        assert_eq!(b.last_ts.rem_euclid(60), 50);
    }

    #[test]
    fn values_render() {
        let mut out = Vec::new();
        Val::Fixed { units: 5897, decimals: 2 }.push(&mut out);
        out.push(b' ');
        Val::Fixed { units: 50, decimals: 3 }.push(&mut out);
        out.push(b' ');
        Val::Fixed { units: 0, decimals: 2 }.push(&mut out);
        out.push(b' ');
        Val::Int(-12).push(&mut out);
        assert_eq!(out, b"58.97 0.050 0.00 -12");
    }

    #[test]
    fn value_kinds_stay_in_range() {
        for h in 0..20 {
            let mut g = Series::new(h, 0);
            let mut c = Series::new(h, 1);
            let mut s = Series::new(h, 2);
            let mut r = Series::new(h, 3);
            let mut last_counter = -1;
            let mut changes = 0;
            let mut last_small = None;
            for _ in 0..1000 {
                match g.next_value() {
                    Val::Fixed { units, decimals: 2 } => assert!((0..=10_000).contains(&units)),
                    v => panic!("{v:?}"),
                }
                match c.next_value() {
                    Val::Int(v) => {
                        assert!(v >= last_counter && v - last_counter.max(v - 5000) <= 5000);
                        last_counter = v;
                    }
                    v => panic!("{v:?}"),
                }
                match s.next_value() {
                    Val::Int(v) => {
                        assert!((0..=20).contains(&v));
                        if last_small.is_some_and(|l| l != v) {
                            changes += 1;
                        }
                        last_small = Some(v);
                    }
                    v => panic!("{v:?}"),
                }
                assert!(matches!(r.next_value(), Val::Fixed { units: 0..=100_000, decimals: 3 }));
            }
            assert!(changes < 150, "{changes}");
        }
    }

    #[test]
    fn telnet_order_and_split() {
        let d = small();
        let conns = d.render_telnet(3);
        let lines: Vec<Vec<&str>> = conns.iter().map(|b| std::str::from_utf8(b).unwrap().lines().collect()).collect();
        assert_eq!(lines.iter().map(Vec::len).sum::<usize>() as u64, d.points());
        // Connection 1 carries hosts 1 and 4; round, then host, then metric.
        let first: Vec<&str> = lines[1][..6].iter().map(|l| l.split(' ').nth(4).unwrap()).collect();
        assert_eq!(first, ["host=host00001"; 5].into_iter().chain(["host=host00004"]).collect::<Vec<_>>());
        let l = lines[1][0].split(' ').collect::<Vec<_>>();
        assert_eq!((l[0], l[1], l[2]), ("put", "sys.cpu.user", "1795302460"));
        assert_eq!(&l[4..], ["host=host00001", "dc=dc1", "env=prod"]);
        assert!(lines[1].last().unwrap().contains(" 1795302480 "));
        // The same bytes for the same series however many connections there are.
        let one = d.render_telnet(1);
        let mut a: Vec<&str> = std::str::from_utf8(&one[0]).unwrap().lines().collect();
        let mut b: Vec<&str> = lines.concat();
        a.sort_unstable();
        b.sort_unstable();
        assert_eq!(a, b);
    }

    #[test]
    fn http_bodies_are_json_arrays_of_the_same_points() {
        let d = small();
        let reqs = d.render_http(2, 4);
        let telnet = d.render_telnet(2);
        for (c, conn) in reqs.iter().enumerate() {
            let mut from_json = Vec::new();
            for req in conn {
                let split = req.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
                let head = std::str::from_utf8(&req[..split]).unwrap();
                assert!(head.starts_with("POST /api/put HTTP/1.1\r\n"));
                assert!(head.contains(&format!("Content-Length: {}\r\n", req.len() - split)));
                let body: serde_json::Value = serde_json::from_slice(&req[split..]).unwrap();
                let arr = body.as_array().unwrap();
                assert!(!arr.is_empty() && arr.len() <= 4);
                for p in arr {
                    let tags = &p["tags"];
                    from_json.push(format!(
                        "put {} {} {} host={} dc={} env={}",
                        p["metric"].as_str().unwrap(),
                        p["timestamp"],
                        p["value"],
                        tags["host"].as_str().unwrap(),
                        tags["dc"].as_str().unwrap(),
                        tags["env"].as_str().unwrap()
                    ));
                }
            }
            let lines: Vec<String> = std::str::from_utf8(&telnet[c]).unwrap().lines().map(String::from).collect();
            // serde_json prints 58.90 as 58.9; compare numerically-equal texts through the telnet rendering.
            assert_eq!(from_json.len(), lines.len());
            for (j, t) in from_json.iter().zip(&lines) {
                let (jw, tw): (Vec<&str>, Vec<&str>) = (j.split(' ').collect(), t.split(' ').collect());
                assert_eq!(jw[..3], tw[..3]);
                assert_eq!(jw[3].parse::<f64>().unwrap(), tw[3].parse::<f64>().unwrap());
                assert_eq!(jw[4..], tw[4..]);
            }
        }
    }

    #[test]
    fn expected_query_matches_the_rendered_values() {
        let d = DataSet { name: "B", metrics: 4, hosts: 3, rounds: 12, last_ts: 1_795_302_470, names: "" };
        let text = String::from_utf8(d.render_telnet(1).concat()).unwrap();
        let mut by_bucket: std::collections::BTreeMap<i64, Vec<(String, f64)>> = Default::default();
        for l in text.lines().filter(|l| l.starts_with("put sys.cpu.user ")) {
            let w: Vec<&str> = l.split(' ').collect();
            let ts: i64 = w[2].parse().unwrap();
            by_bucket.entry(ts - ts % 60).or_default().push((w[4].to_string(), w[3].parse().unwrap()));
        }
        let expected = d.expected_sum_of_avgs(None);
        assert_eq!(expected.len(), 2);
        for (b, v) in expected {
            let pts = &by_bucket[&b];
            assert_eq!(pts.len(), 18);
            let sum: f64 = pts.iter().map(|p| p.1).sum::<f64>() / 6.0;
            assert!((sum - v).abs() < 1e-9, "{b}: {sum} vs {v}");
        }
        let one = d.expected_sum_of_avgs(Some(&[2]));
        let pts: Vec<f64> = by_bucket[&one[0].0].iter().filter(|p| p.0 == "host=host00002").map(|p| p.1).collect();
        assert!((pts.iter().sum::<f64>() / 6.0 - one[0].1).abs() < 1e-9);
    }
}
