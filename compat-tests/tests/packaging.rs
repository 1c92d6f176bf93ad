//! The Debian package (issue 18 item 5; README "Installing the package"): `cargo deb` builds it from the
//! metadata in Cargo.toml, `dpkg -x` unpacks it into a temporary root, and the packaged binary serves with the
//! packaged configuration.
//!
//! The package is built from the binary under test (this build's daemon, copied where cargo-deb looks for the
//! release binary, with `--no-build`): a release build here would double CI's compile time, and what is checked is
//! the packaging (paths, unit, conffile, maintainer script), not the optimiser.
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rtsd_compat_tests::{binary, HttpConn};

fn run(cmd: &mut Command) -> String {
    let out = cmd.stdin(Stdio::null()).output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_deb_holds_binary_unit_and_config_and_the_packaged_binary_serves() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let work = tempfile::tempdir().unwrap();
    // cargo-deb replaces `target/release/` in asset paths by the real target directory.
    let target = work.path().join("target");
    std::fs::create_dir_all(target.join("release")).unwrap();
    std::fs::copy(binary(), target.join("release/rtsd")).unwrap();
    let deb = work.path().join("rtsd.deb");
    run(Command::new("cargo")
        // --fast: the binary under test is a debug build of hundreds of MB; xz at its default level took ~50 s.
        .args(["deb", "-p", "rtsd", "--no-build", "--no-strip", "--fast", "--output"])
        .arg(&deb)
        .current_dir(workspace)
        .env("CARGO_TARGET_DIR", &target));

    // The control fields an operator and apt rely on.
    let control = run(Command::new("dpkg-deb").arg("-f").arg(&deb));
    assert!(control.contains("Package: rtsd\n"), "{control}");
    let depends = control.lines().find(|l| l.starts_with("Depends: ")).unwrap_or_default();
    assert!(depends.contains("adduser"), "{control}");
    let conffiles = run(Command::new("sh")
        .arg("-c")
        .arg(format!("dpkg-deb --ctrl-tarfile {} | tar -xO ./conffiles", deb.display())));
    assert_eq!(conffiles.trim(), "/etc/rtsd/rtsd.conf");
    let postinst = run(Command::new("sh")
        .arg("-c")
        .arg(format!("dpkg-deb --ctrl-tarfile {} | tar -xO ./postinst", deb.display())));
    assert!(postinst.contains("adduser --system --group --home /var/lib/rtsd"), "{postinst}");
    assert!(
        postinst.contains("systemctl") || postinst.contains("deb-systemd-helper"),
        "the unit is enabled: {postinst}"
    );

    let root = work.path().join("root");
    run(Command::new("dpkg").arg("-x").arg(&deb).arg(&root));
    let bin = root.join("usr/bin/rtsd");
    let conf = root.join("etc/rtsd/rtsd.conf");
    let unit = ["lib/systemd/system/rtsd.service", "usr/lib/systemd/system/rtsd.service"]
        .iter()
        .map(|p| root.join(p))
        .find(|p| p.exists())
        .expect("the systemd unit in the package");
    let unit_text = std::fs::read_to_string(&unit).unwrap();
    for line in [
        "User=rtsd",
        "StateDirectory=rtsd",
        "ExecStart=/usr/bin/rtsd serve --config /etc/rtsd/rtsd.conf",
        "Restart=on-failure",
        "LimitNOFILE=65536",
    ] {
        assert!(unit_text.lines().any(|l| l == line), "{line} in the unit:\n{unit_text}");
    }
    let conf_text = std::fs::read_to_string(&conf).unwrap();
    assert!(conf_text.lines().any(|l| l == "rtsd.data_dir = /var/lib/rtsd"), "{conf_text}");
    // The packaged configuration is the shipped one but for its data directory.
    let shipped = std::fs::read_to_string(workspace.join("rtsd.conf")).unwrap();
    let differing: Vec<(&str, &str)> =
        shipped.lines().zip(conf_text.lines()).filter(|(a, b)| a != b && !a.starts_with('#')).collect();
    assert_eq!(differing, [("rtsd.data_dir = ./rtsd-data", "rtsd.data_dir = /var/lib/rtsd")]);

    // The packaged binary with the packaged config (its data directory moved to a temporary one) on a free port.
    let data = work.path().join("data");
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut child = Command::new(&bin)
        .args(["serve", "--config"])
        .arg(&conf)
        .arg("--data-dir")
        .arg(&data)
        .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
        assert!(Instant::now() < deadline, "the packaged rtsd did not start");
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut c = HttpConn::new(addr);
    let put = c.request(
        "POST",
        "/api/put?details",
        &[],
        br#"{"metric":"pkg.m","timestamp":1700000000,"value":7,"tags":{"h":"a"}}"#,
    );
    assert_eq!((put.status, put.text()), (200, r#"{"success":1,"failed":0,"errors":[]}"#.to_string()));
    let q = c.request("GET", "/api/query?start=1699999999&end=1700000001&m=sum:pkg.m", &[], b"");
    assert_eq!(q.text(), r#"[{"metric":"pkg.m","tags":{"h":"a"},"aggregateTags":[],"dps":{"1700000000":7}}]"#);
    let _ = child.kill();
    let _ = child.wait();
}
