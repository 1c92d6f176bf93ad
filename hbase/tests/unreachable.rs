//! Without a reachable HBase, calls fail with `Error::Unreachable` at their deadline (no cluster needed).
use std::time::{Duration, Instant};

use rtsd_hbase::{Client, Config, Error};

fn config(quorum: &str) -> Config {
    let mut cfg = Config::new(quorum, "/hbase");
    cfg.operation_timeout = Duration::from_millis(800);
    cfg.rpc_timeout = Duration::from_millis(300);
    cfg
}

#[tokio::test]
async fn nothing_listening_is_unreachable() {
    // A port that was free a moment ago: connections are refused.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let t0 = Instant::now();
    let err = Client::with_config(config(&format!("127.0.0.1:{port}"))).await.err().expect("no cluster there");
    assert!(matches!(err, Error::Unreachable(_)), "{err:?}");
    assert!(err.is_unreachable());
    let took = t0.elapsed();
    assert!(took >= Duration::from_millis(500) && took < Duration::from_secs(3), "{took:?}");
}

#[tokio::test]
async fn a_silent_server_is_unreachable_at_the_deadline() {
    // Accepts connections and never answers.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let hold = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = listener.accept().await {
            held.push(s);
        }
    });
    let t0 = Instant::now();
    let err = Client::with_config(config(&addr.to_string())).await.err().expect("nothing answers");
    assert!(err.is_unreachable(), "{err:?}");
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    hold.abort();
}
