//! The build facts behind telnet `version`, `/version` and `/api/version` (spec: ingest §1.5, query §6.10).
//!
//! rtsd answers as OpenTSDB 2.4.1, the protocol version it implements, so clients that branch on the version
//! behave as with 2.4. The object has exactly 2.4's keys (spec: query §6.10); the revision, time, user and host are
//! rtsd's own build facts, and `rtsd --version` prints rtsd's version.

/// The OpenTSDB version whose protocols rtsd speaks.
pub const OPENTSDB_VERSION: &str = "2.4.1";
pub const RTSD_VERSION: &str = env!("CARGO_PKG_VERSION");
const FULL_REVISION: &str = env!("RTSD_GIT_REV");
const BRANCH: &str = env!("RTSD_GIT_BRANCH");
const REPO_STATUS: &str = env!("RTSD_REPO_STATUS");
const BUILD_TIME: &str = env!("RTSD_BUILD_TIME");
const USER: &str = env!("RTSD_BUILD_USER");
const HOST: &str = env!("RTSD_BUILD_HOST");
const REPO: &str = env!("RTSD_BUILD_DIR");

fn short_revision() -> &'static str {
    &FULL_REVISION[..FULL_REVISION.len().min(7)]
}

/// The two lines OpenTSDB's `version` command writes.
pub fn telnet_reply() -> String {
    let built = BUILD_TIME.parse::<i64>().unwrap_or(0);
    format!(
        "net.opentsdb.tools {OPENTSDB_VERSION} built at revision {} ({REPO_STATUS})\nBuilt on {} +0000 by {USER}@{HOST}:{REPO}\n",
        short_revision(),
        crate::timefmt::format_utc(built),
    )
}

/// `/api/version`: an object of string values, in the order 2.4's `HashMap` iterates its nine keys.
pub fn json() -> String {
    let facts = [
        ("version", OPENTSDB_VERSION),
        ("short_revision", short_revision()),
        ("full_revision", FULL_REVISION),
        ("timestamp", BUILD_TIME),
        ("repo_status", REPO_STATUS),
        ("user", USER),
        ("host", HOST),
        ("repo", REPO),
        ("branch", BRANCH),
    ];
    let keys: Vec<&str> = facts.iter().map(|(k, _)| *k).collect();
    let mut out = String::from("{");
    for (n, i) in rtsd_protocol::javafmt::hashmap_order(&keys).into_iter().enumerate() {
        if n > 0 {
            out.push(',');
        }
        let (k, v) = facts[i];
        out.push_str(&format!(
            "{}:{}",
            rtsd_protocol::http_json::json_string(k),
            rtsd_protocol::http_json::json_string(v)
        ));
    }
    out.push('}');
    out
}

#[cfg(test)]
mod tests {
    // spec: query §6.10: the keys as a Java HashMap of these nine iterates them.
    #[test]
    fn api_version_keys_in_hashmap_order() {
        let json = super::json();
        let value: serde_json::Map<String, serde_json::Value> = serde_json::from_str(&json).unwrap();
        let keys: Vec<&str> = value.keys().map(String::as_str).collect();
        let mut order: Vec<(usize, &str)> =
            keys.iter().map(|k| (json.find(&format!("\"{k}\":")).unwrap(), *k)).collect();
        order.sort();
        let order: Vec<&str> = order.into_iter().map(|(_, k)| k).collect();
        assert_eq!(
            order,
            [
                "short_revision",
                "repo",
                "host",
                "version",
                "full_revision",
                "repo_status",
                "user",
                "branch",
                "timestamp"
            ]
        );
    }
}
