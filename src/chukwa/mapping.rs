//! Chunk contents -> metric samples (spec: chukwa §5.5-§5.7, §8.5).
//!
//! Each processor reproduces what Chukwa 0.7+'s `extraction/hbase` processor of the same name writes: the full
//! metric name `<dataType>.<name>`, the source, the timestamp taken from the data, and the value as the Java
//! string Chukwa stores (`Double.toString` for computed aggregates, `String.valueOf` for values copied from the
//! JSON). The daemon stores each [`Sample`] twice: in Chukwa's own `chukwa` table layout (the string as is) and,
//! when the string is a number, as an OpenTSDB point with the tags `host`, `process` and `cluster`.
//!
//! * [`Processor::SystemMetrics`]: sigar JSON; per-CPU values and the exact aggregates of `SystemMetrics.java`.
//! * [`Processor::HadoopMetrics`] / [`Processor::ChukwaMetrics`]: every `{...}` in the body, as
//!   `HadoopMetricsProcessor.java` (source `host:ProcessName`).
//! * [`Processor::FlatJson`]: JMX/REST adaptors' flat objects, timed by the chunk's `timeStamp` tag.
//! * [`Processor::Rule`]: a user rule (line regex + timestamp format) from the configuration.
//! * [`Processor::Raw`]: nothing; the chunk is only counted.
use std::sync::Arc;

use rtsd_protocol::javafmt::double_to_string;
use rtsd_protocol::number::parse_java_double;
use serde_json::{Map, Value};

use super::rules::Rule;

/// Which processor handles a chunk.
#[derive(Debug, Clone)]
pub enum Processor {
    SystemMetrics,
    HadoopMetrics,
    /// `HadoopMetrics` plus the chunk's cluster registered in `chukwa_meta`.
    ChukwaMetrics,
    FlatJson,
    Rule(Arc<Rule>),
    Raw,
}

impl Processor {
    /// The processor named in `rtsd.chukwa.processor.<dataType>`.
    pub fn from_name(name: &str) -> Option<Processor> {
        Some(match name.trim().to_ascii_lowercase().as_str() {
            "system_metrics" | "systemmetrics" | "sigar" => Processor::SystemMetrics,
            "hadoop_metrics" | "hadoopmetrics" | "hadoop" => Processor::HadoopMetrics,
            "chukwa_metrics" | "chukwametrics" => Processor::ChukwaMetrics,
            "flat_json" | "json" | "jmx" => Processor::FlatJson,
            "raw" | "none" | "default" => Processor::Raw,
            _ => return None,
        })
    }

    /// Chukwa's default mapping (`chukwa-demux-conf.xml`): by dataType, then JMX/REST streams, else raw.
    pub fn default_for(data_type: &str, stream_name: &str) -> Processor {
        match data_type {
            "SystemMetrics" => Processor::SystemMetrics,
            "HadoopMetrics" | "HBaseMetrics" => Processor::HadoopMetrics,
            "ChukwaMetrics" => Processor::ChukwaMetrics,
            _ if stream_name == "JMX" || stream_name == "REST" => Processor::FlatJson,
            _ => Processor::Raw,
        }
    }

    pub fn is_raw(&self) -> bool {
        matches!(self, Processor::Raw)
    }
}

/// What a processor needs to know about the chunk besides its bytes.
#[derive(Debug, Clone, Copy)]
pub struct ChunkInfo<'a> {
    pub data_type: &'a str,
    pub source: &'a str,
    pub tags: &'a str,
}

/// One value, as Chukwa stores it and as OpenTSDB receives it.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Chukwa's full name, `<dataType>.<name>`.
    pub name: String,
    /// Chukwa's source: the chunk's source, or `host:ProcessName` for Hadoop metrics.
    pub source: String,
    /// Milliseconds, from the data.
    pub time: i64,
    /// The value as the Java string Chukwa writes.
    pub value: String,
    /// The `host` tag (before sanitising).
    pub host: String,
    /// The `process` tag, when there is one.
    pub process: Option<String>,
    /// More tags from a user rule's `tag_*` groups.
    pub extra_tags: Vec<(String, String)>,
}

/// A processor's output for one chunk.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Extracted {
    pub samples: Vec<Sample>,
    /// The processor's time after parsing (Chukwa's `time` field): the annotation row's time. `None` when no
    /// timestamp was read.
    pub time: Option<i64>,
    /// Sources registered in `chukwa_meta` besides the chunk's own (Hadoop's `host:Process`).
    pub sources: Vec<String>,
    /// Register the chunk's cluster in `chukwa_meta` (`ChukwaMetricsProcessor`).
    pub register_cluster: bool,
    /// Some content could not be parsed (counted as a drop; the chunk is still acknowledged).
    pub unparsable: bool,
}

/// Runs `processor` over `data`: the chunk's bytes, or the records of it that survived de-duplication.
pub fn extract(processor: &Processor, info: &ChunkInfo<'_>, data: &[u8]) -> Extracted {
    match processor {
        Processor::SystemMetrics => system_metrics(info, data),
        Processor::HadoopMetrics => hadoop_metrics(info, data, false),
        Processor::ChukwaMetrics => hadoop_metrics(info, data, true),
        Processor::FlatJson => flat_json(info, data),
        Processor::Rule(rule) => rule.extract(info, data),
        Processor::Raw => Extracted::default(),
    }
}

/// `String.valueOf` of a json-simple value: Longs in decimal, Doubles by `Double.toString`, strings as they are.
pub fn java_string(v: &Value) -> String {
    match v {
        Value::Null => "null".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => i.to_string(),
            (None, Some(u)) => u.to_string(),
            _ => double_to_string(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// JSON text as Java reads it: `new String(bytes, UTF-8)` replaces malformed bytes instead of failing.
fn parse_json(data: &[u8]) -> Option<Value> {
    let text = String::from_utf8_lossy(data);
    serde_json::from_str(text.trim()).ok()
}

/// json-simple's `Long` check: an integral number that fits an `i64`.
fn as_long(v: &Value) -> Option<i64> {
    v.as_i64()
}

/// `SystemMetrics.java` (spec §5.5). Java fails the whole chunk on a missing section (a NullPointerException);
/// here a missing section is skipped, a malformed one (a CPU entry that isn't an object, a `combined` without
/// `user`) fails the chunk as in Java, and the timestamp is required.
fn system_metrics(info: &ChunkInfo<'_>, data: &[u8]) -> Extracted {
    let mut out = Extracted::default();
    let Some(values) = parse_json(data).and_then(|json| system_metric_values(&json)) else {
        out.unparsable = true;
        return out;
    };
    let (time, values) = values;
    out.time = Some(time);
    out.samples = values
        .into_iter()
        .map(|(name, value)| Sample {
            name: format!("{}.{name}", info.data_type),
            source: info.source.to_string(),
            time,
            value,
            host: info.source.to_string(),
            process: None,
            extra_tags: Vec::new(),
        })
        .collect();
    out
}

/// The (name, value) pairs `SystemMetrics.java` writes for one sigar sample, and the sample's time.
fn system_metric_values(json: &Value) -> Option<(i64, Vec<(String, String)>)> {
    let obj = json.as_object()?;
    let time = as_long(obj.get("timestamp")?)?;
    let mut out: Vec<(String, String)> = Vec::new();
    let d = |v: f64| double_to_string(v);
    let number = |v: Option<&Value>| -> Option<f64> { parse_java_double(java_string(v?).trim()).ok() };

    if let Some(cpus) = obj.get("cpu") {
        let cpus = cpus.as_array()?;
        let (mut combined, mut user, mut sys, mut idle, mut actual) = (0.0, 0.0, 0.0, 0.0, 0u32);
        for (i, cpu) in cpus.iter().enumerate() {
            let cpu = cpu.as_object()?;
            // "Work around for sigar returning null sometimes for cpu metrics on pLinux."
            if cpu.get("combined").is_none_or(Value::is_null) {
                continue;
            }
            actual += 1;
            combined += number(cpu.get("combined"))?;
            user += number(cpu.get("user"))?;
            sys += number(cpu.get("sys"))?;
            idle += number(cpu.get("idle"))?;
            for (key, value) in cpu {
                out.push((format!("cpu.{key}.{i}"), java_string(value)));
            }
        }
        let n = f64::from(actual);
        out.push(("cpu.combined".into(), d(combined / n)));
        out.push(("cpu.user".into(), d(user / n)));
        out.push(("cpu.idle".into(), d(idle / n)));
        out.push(("cpu.sys".into(), d(sys / n)));
    }
    if let Some(uptime) = obj.get("uptime") {
        out.push(("Uptime".into(), java_string(uptime)));
    }
    if let Some(load) = obj.get("loadavg") {
        let load = load.as_array()?;
        for (name, v) in ["LoadAverage.1", "LoadAverage.5", "LoadAverage.15"].iter().zip(load) {
            out.push((name.to_string(), java_string(v)));
        }
    }
    for section in ["memory", "swap"] {
        if let Some(map) = obj.get(section) {
            for (key, value) in map.as_object()? {
                out.push((format!("{section}.{key}"), java_string(value)));
            }
        }
    }
    if let Some(net) = obj.get("network") {
        const KEYS: [&str; 8] =
            ["RxBytes", "RxDropped", "RxErrors", "RxPackets", "TxBytes", "TxCollisions", "TxErrors", "TxPackets"];
        let mut sums = [0.0f64; 8];
        for (i, iface) in net.as_array()?.iter().enumerate() {
            let iface = iface.as_object()?;
            // Interface 0 (usually lo) is left out of the sums; only Long values count.
            if i == 0 {
                continue;
            }
            for (k, sum) in KEYS.iter().zip(sums.iter_mut()) {
                *sum += iface.get(*k).and_then(as_long).unwrap_or(0) as f64;
            }
        }
        for (k, sum) in KEYS.iter().zip(sums) {
            out.push((format!("network.{k}"), d(sum)));
        }
    }
    if let Some(disks) = obj.get("disk") {
        const KEYS: [&str; 6] = ["ReadBytes", "Reads", "WriteBytes", "Writes", "Total", "Used"];
        let mut sums = [0.0f64; 6];
        for disk in disks.as_array()? {
            let disk = disk.as_object()?;
            for (k, sum) in KEYS.iter().zip(sums.iter_mut()) {
                *sum += disk.get(*k).and_then(as_long).unwrap_or(0) as f64;
            }
        }
        for (k, sum) in KEYS.iter().zip(sums) {
            out.push((format!("disk.{k}"), d(sum)));
        }
        // A fraction, not a percentage: Used / Total.
        out.push(("disk.PercentUsed".into(), d(sums[5] / sums[4])));
    }
    Some((time, out))
}

const HADOOP_SKIPPED: [&str; 5] = ["timestamp", "contextName", "recordName", "Hostname", "ProcessName"];

/// `HadoopMetricsProcessor.java` (spec §5.6): each `{` up to the first following `}` is parsed as a JSON object;
/// the first one that fails (bad JSON, no integral `timestamp`, no `Hostname`) stops the scan, as Java's single
/// try block does, and what was read before it is kept.
fn hadoop_metrics(info: &ChunkInfo<'_>, data: &[u8], cluster: bool) -> Extracted {
    let mut out = Extracted { register_cluster: cluster, ..Extracted::default() };
    let body = String::from_utf8_lossy(data);
    let mut end = 0;
    while let Some(start) = body[end..].find('{').map(|p| p + end) {
        let Some(close) = body[start..].find('}').map(|p| start + p + 1) else {
            out.unparsable = true;
            break;
        };
        end = close;
        let parsed: Option<Map<String, Value>> = serde_json::from_str(&body[start..close]).ok();
        let Some(record) = parsed.and_then(|json| hadoop_record(info, &json)) else {
            out.unparsable = true;
            break;
        };
        let (time, source, samples) = record;
        out.time = Some(time);
        out.sources.push(source);
        out.samples.extend(samples);
    }
    out
}

fn hadoop_record(info: &ChunkInfo<'_>, json: &Map<String, Value>) -> Option<(i64, String, Vec<Sample>)> {
    let time = as_long(json.get("timestamp")?)?;
    // `(String) json.get(...)`: null appends as "null", anything else but a string is a ClassCastException.
    let text = |key: &str| -> Option<String> {
        match json.get(key) {
            None | Some(Value::Null) => Some("null".to_string()),
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => None,
        }
    };
    let context = text("contextName")?;
    let record = text("recordName")?;
    let host = match json.get("Hostname")? {
        Value::String(s) => s.to_lowercase(),
        _ => return None,
    };
    let process = json.get("ProcessName").filter(|v| !v.is_null()).map(java_string);
    let source = match &process {
        Some(p) => format!("{host}:{p}"),
        None => host.clone(),
    };
    let samples = json
        .iter()
        .filter(|(k, v)| !HADOOP_SKIPPED.contains(&k.as_str()) && !v.is_null())
        .map(|(key, value)| Sample {
            name: format!("{}.{context}.{record}.{key}", info.data_type),
            source: source.clone(),
            time,
            value: java_string(value),
            host: host.clone(),
            process: process.clone(),
            extra_tags: Vec::new(),
        })
        .collect();
    Some((time, source, samples))
}

/// JMX and REST adaptors' chunks (spec §8.5): one flat JSON object of attribute -> value, timed by the chunk's
/// `timeStamp` tag (or, failing that, a `timestamp` member). Scalars only; nested values are skipped.
fn flat_json(info: &ChunkInfo<'_>, data: &[u8]) -> Extracted {
    let mut out = Extracted::default();
    let Some(Value::Object(map)) = parse_json(data) else {
        out.unparsable = true;
        return out;
    };
    let time = rtsd_protocol::chukwa::get_tag(info.tags, "timeStamp")
        .and_then(|t| t.trim().parse::<i64>().ok())
        .or_else(|| map.get("timestamp").and_then(as_long));
    let Some(time) = time else {
        out.unparsable = true;
        return out;
    };
    out.time = Some(time);
    out.samples = map
        .iter()
        .filter(|(k, v)| k.as_str() != "timestamp" && matches!(v, Value::Number(_) | Value::String(_) | Value::Bool(_)))
        .map(|(key, value)| Sample {
            name: format!("{}.{key}", info.data_type),
            source: info.source.to_string(),
            time,
            value: java_string(value),
            host: info.source.to_string(),
            process: None,
            extra_tags: Vec::new(),
        })
        .collect();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: i64 = 1_466_380_800_000;

    fn info(data_type: &'static str) -> ChunkInfo<'static> {
        ChunkInfo { data_type, source: "host1", tags: r#" cluster="demo""# }
    }

    fn values(x: &Extracted) -> Vec<(String, String)> {
        let mut v: Vec<_> = x.samples.iter().map(|s| (s.name.clone(), s.value.clone())).collect();
        v.sort();
        v
    }

    fn get<'a>(x: &'a Extracted, name: &str) -> Option<&'a str> {
        x.samples.iter().find(|s| s.name == name).map(|s| s.value.as_str())
    }

    /// §8.5's worked example: one CPU with combined 12.5 and memory.UsedPercent "43.2".
    #[test]
    fn worked_example() {
        let json = format!(
            r#"{{"timestamp":{T},"cpu":[{{"combined":12.5,"user":10.0,"sys":2.5,"idle":87.5,"Vendor":"Intel"}}],
               "memory":{{"UsedPercent":"43.2"}}}}"#
        );
        let x = extract(&Processor::SystemMetrics, &info("SystemMetrics"), json.as_bytes());
        assert!(!x.unparsable);
        assert_eq!(x.time, Some(T));
        assert_eq!(get(&x, "SystemMetrics.cpu.combined.0"), Some("12.5"));
        assert_eq!(get(&x, "SystemMetrics.cpu.combined"), Some("12.5"));
        assert_eq!(get(&x, "SystemMetrics.cpu.Vendor.0"), Some("Intel"));
        assert_eq!(get(&x, "SystemMetrics.memory.UsedPercent"), Some("43.2"));
        assert!(x.samples.iter().all(|s| s.time == T && s.source == "host1" && s.host == "host1"));
    }

    /// The aggregates as SystemMetrics.java computes them: CPU means over CPUs with a `combined`, network sums
    /// without interface 0 and only over integral values, disk sums, PercentUsed a fraction, all by
    /// `Double.toString`.
    #[test]
    fn sigar_aggregates() {
        let json = format!(
            r#"{{"timestamp":{T},"uptime":12345.6,"loadavg":[0.5,1.0,1.5],
              "cpu":[{{"combined":0.5,"user":0.25,"sys":0.25,"idle":0.5}},{{"combined":null,"user":9}},
                     {{"combined":"0.25","user":"0.125","sys":"0.125","idle":"0.75"}}],
              "swap":{{"Total":"1024","Used":"0"}},
              "network":[{{"RxBytes":1000000,"TxBytes":5}},{{"RxBytes":300,"TxBytes":"7","RxPackets":2}},{{"RxBytes":200}}],
              "disk":[{{"ReadBytes":10,"Total":4000,"Used":1000,"DevName":"/dev/sda1"}},{{"Reads":3,"Total":6000,"Used":4000}}]}}"#
        );
        let x = extract(&Processor::SystemMetrics, &info("SystemMetrics"), json.as_bytes());
        assert!(!x.unparsable, "{x:?}");
        let v = |n: &str| get(&x, &format!("SystemMetrics.{n}")).unwrap_or_else(|| panic!("no {n}")).to_string();
        assert_eq!(v("cpu.combined"), "0.375");
        assert_eq!(v("cpu.user"), "0.1875");
        assert_eq!(v("cpu.idle"), "0.625");
        assert_eq!(v("cpu.sys"), "0.1875");
        assert_eq!(v("cpu.combined.2"), "0.25");
        assert!(get(&x, "SystemMetrics.cpu.user.1").is_none(), "a CPU without combined is skipped entirely");
        assert_eq!(v("Uptime"), "12345.6");
        assert_eq!(v("LoadAverage.1"), "0.5");
        assert_eq!(v("LoadAverage.15"), "1.5");
        assert_eq!(v("swap.Total"), "1024");
        assert_eq!(v("network.RxBytes"), "500.0");
        assert_eq!(v("network.TxBytes"), "0.0", "a string is not a Long, interface 0 is skipped");
        assert_eq!(v("network.RxPackets"), "2.0");
        assert_eq!(v("network.TxCollisions"), "0.0");
        assert_eq!(v("disk.ReadBytes"), "10.0");
        assert_eq!(v("disk.Reads"), "3.0");
        assert_eq!(v("disk.Total"), "10000.0");
        assert_eq!(v("disk.Used"), "5000.0");
        assert_eq!(v("disk.PercentUsed"), "0.5");
        assert!(get(&x, "SystemMetrics.disk.DevName.0").is_none(), "per-disk values are not written");
    }

    #[test]
    fn sigar_edge_cases() {
        // No CPU with combined: the means are NaN, as Java's 0.0 / 0.
        let json = format!(r#"{{"timestamp":{T},"cpu":[],"disk":[]}}"#);
        let x = extract(&Processor::SystemMetrics, &info("SystemMetrics"), json.as_bytes());
        assert_eq!(get(&x, "SystemMetrics.cpu.combined"), Some("NaN"));
        assert_eq!(get(&x, "SystemMetrics.disk.PercentUsed"), Some("NaN"));
        assert_eq!(get(&x, "SystemMetrics.disk.Total"), Some("0.0"));
        // Big sums print in Java's scientific form.
        let json = format!(r#"{{"timestamp":{T},"disk":[{{"Total":20000000,"Used":1}}]}}"#);
        let x = extract(&Processor::SystemMetrics, &info("SystemMetrics"), json.as_bytes());
        assert_eq!(get(&x, "SystemMetrics.disk.Total"), Some("2.0E7"));
        for bad in [
            "not json".to_string(),
            r#"{"cpu":[]}"#.to_string(),
            format!(r#"{{"timestamp":{T}.5}}"#),
            format!(r#"{{"timestamp":{T},"cpu":[{{"combined":1}}]}}"#),
            format!(r#"{{"timestamp":{T},"cpu":[7]}}"#),
            "[1,2]".to_string(),
        ] {
            let x = extract(&Processor::SystemMetrics, &info("SystemMetrics"), bad.as_bytes());
            assert!(x.unparsable && x.samples.is_empty(), "{bad}");
        }
    }

    /// §5.6's example: a metrics2 line through the SocketAdaptor.
    #[test]
    fn hadoop_metrics_line() {
        let line = format!(
            "2016-06-20 00:00:00,123 INFO chukwa.metrics.HadoopMetrics: {{\"timestamp\":{T},\"contextName\":\"jvm\",\
             \"recordName\":\"JvmMetrics\",\"Hostname\":\"NN1.example.com\",\"ProcessName\":\"NameNode\",\
             \"Context\":\"jvm\",\"MemHeapUsedM\":123.4,\"GcCount\":7,\"SessionId\":null}}\n"
        );
        let x = extract(&Processor::HadoopMetrics, &info("HadoopMetrics"), line.as_bytes());
        assert!(!x.unparsable);
        assert_eq!(
            values(&x),
            [
                ("HadoopMetrics.jvm.JvmMetrics.Context".to_string(), "jvm".to_string()),
                ("HadoopMetrics.jvm.JvmMetrics.GcCount".to_string(), "7".to_string()),
                ("HadoopMetrics.jvm.JvmMetrics.MemHeapUsedM".to_string(), "123.4".to_string()),
            ]
        );
        let s = &x.samples[0];
        assert_eq!(
            (s.source.as_str(), s.host.as_str(), s.process.as_deref()),
            ("nn1.example.com:NameNode", "nn1.example.com", Some("NameNode"))
        );
        assert_eq!(x.sources, ["nn1.example.com:NameNode"]);
        assert!(!x.register_cluster);
        assert!(extract(&Processor::ChukwaMetrics, &info("ChukwaMetrics"), line.as_bytes()).register_cluster);
    }

    #[test]
    fn hadoop_metrics_stops_at_the_first_bad_object() {
        let body = format!(
            "{{\"timestamp\":{T},\"Hostname\":\"a\",\"x\":1}} {{\"timestamp\":{T},\"x\":2}} {{\"timestamp\":{T},\"Hostname\":\"c\",\"x\":3}}"
        );
        let x = extract(&Processor::HadoopMetrics, &info("HadoopMetrics"), body.as_bytes());
        assert!(x.unparsable);
        assert_eq!(values(&x), [("HadoopMetrics.null.null.x".to_string(), "1".to_string())]);
        let x = extract(&Processor::HadoopMetrics, &info("HadoopMetrics"), b"no json here\n");
        assert!(!x.unparsable && x.samples.is_empty() && x.time.is_none());
        let x = extract(&Processor::HadoopMetrics, &info("HadoopMetrics"), b"{\"timestamp\":1");
        assert!(x.unparsable);
    }

    #[test]
    fn jmx_flat_json_uses_the_timestamp_tag() {
        let info =
            ChunkInfo { data_type: "JmxData", source: "host1", tags: r#" cluster="demo" timeStamp="1466380800123""# };
        let x = extract(
            &Processor::FlatJson,
            &info,
            br#"{"HeapMemoryUsage":4096,"Uptime":"77","Name":"x","Arr":[1],"On":true}"#,
        );
        assert_eq!(x.time, Some(1_466_380_800_123));
        assert_eq!(
            values(&x),
            [
                ("JmxData.HeapMemoryUsage".to_string(), "4096".to_string()),
                ("JmxData.Name".to_string(), "x".to_string()),
                ("JmxData.On".to_string(), "true".to_string()),
                ("JmxData.Uptime".to_string(), "77".to_string()),
            ]
        );
        let untimed = ChunkInfo { tags: "", ..info };
        assert!(extract(&Processor::FlatJson, &untimed, br#"{"a":1}"#).unparsable);
    }

    #[test]
    fn dispatch_follows_chukwas_defaults() {
        assert!(matches!(Processor::default_for("SystemMetrics", "Sigar"), Processor::SystemMetrics));
        assert!(matches!(Processor::default_for("HBaseMetrics", "x"), Processor::HadoopMetrics));
        assert!(matches!(Processor::default_for("ChukwaMetrics", "x"), Processor::ChukwaMetrics));
        assert!(matches!(Processor::default_for("JmxData", "JMX"), Processor::FlatJson));
        assert!(Processor::default_for("HadoopLog", "/var/log/x").is_raw());
        assert!(matches!(Processor::from_name("SIGAR"), Some(Processor::SystemMetrics)));
        assert!(Processor::from_name("bogus").is_none());
    }

    #[test]
    fn java_strings() {
        let v: Value =
            serde_json::from_str(r#"[1, -2, 1.5, 1.0E7, 3.0, "s", true, null, 18446744073709551615]"#).unwrap();
        let got: Vec<String> = v.as_array().unwrap().iter().map(java_string).collect();
        assert_eq!(got, ["1", "-2", "1.5", "1.0E7", "3.0", "s", "true", "null", "18446744073709551615"]);
    }
}
