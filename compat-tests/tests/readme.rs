//! The README's shell examples, run as pasted against a started rtsd (issue 18 item 3), so the README cannot
//! drift from what rtsd answers. Every ```sh block runs unless the line before its fence is a
//! `<!-- readme-test: skip (why) -->` comment. Only the port is changed (the daemon takes a free one). The blocks run
//! in order in one temporary directory where `rtsd-data` is the daemon's data directory and
//! `target/release/rtsd` is the binary under test, so `--data-dir ./rtsd-data` and the README's `PATH` line work as
//! they do after `scripts/run`.
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use rtsd_compat_tests::{binary, Daemon};

/// A runnable block: the README line its fence is on, and its text.
struct Block {
    line: usize,
    text: String,
}

fn sh_blocks(readme: &str) -> (Vec<Block>, usize) {
    let (mut blocks, mut skipped) = (Vec::new(), 0);
    let lines: Vec<&str> = readme.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].starts_with("```") {
            let lang = lines[i].trim_start_matches('`').trim();
            let end = (i + 1..lines.len()).find(|&j| lines[j].starts_with("```")).expect("closed fence");
            let before = lines[..i].iter().rev().find(|l| !l.trim().is_empty()).copied().unwrap_or("");
            if lang == "sh" {
                if before.trim_start().starts_with("<!-- readme-test: skip") {
                    skipped += 1;
                } else {
                    blocks.push(Block { line: i + 1, text: lines[i + 1..end].join("\n") });
                }
            }
            i = end + 1;
        } else {
            i += 1;
        }
    }
    (blocks, skipped)
}

fn readme_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("README.md")
}

#[test]
fn every_readme_shell_example_runs_against_rtsd_without_an_error() {
    let readme = std::fs::read_to_string(readme_path()).expect("README.md");
    let (blocks, skipped) = sh_blocks(&readme);
    // The examples of writing, reading, expressions, /q and the tools; the skipped ones say why in the README.
    assert!(
        blocks.len() >= 5 && skipped >= 3,
        "{} blocks to run, {skipped} skipped: the extraction broke",
        blocks.len()
    );
    for tool in ["curl", "nc"] {
        let found = Command::new("sh").arg("-c").arg(format!("command -v {tool}")).output().unwrap();
        assert!(found.status.success(), "{tool} is missing: scripts/run and scripts/install-test-deps install it");
    }

    let d = Daemon::start();
    let cwd = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(d.data_dir(), cwd.path().join("rtsd-data")).unwrap();
    std::fs::create_dir_all(cwd.path().join("target/release")).unwrap();
    std::os::unix::fs::symlink(binary(), cwd.path().join("target/release/rtsd")).unwrap();
    let port = d.port().to_string();
    // curl answers an HTTP error with exit 22 (and the body) instead of 0.
    let prelude = "set -euo pipefail\ncurl() { command curl --fail-with-body \"$@\"; }\n";
    for block in &blocks {
        let script = block
            .text
            .replace("localhost:4242", &format!("localhost:{port}"))
            .replace("localhost 4242", &format!("localhost {port}"));
        let out = Command::new("bash")
            .arg("-c")
            .arg(format!("{prelude}{script}"))
            .current_dir(cwd.path())
            .env("NO_COLOR", "1")
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .output()
            .expect("run bash");
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        let context = format!("README line {}:\n{script}\n--- stdout:\n{stdout}\n--- stderr:\n{stderr}", block.line);
        assert!(out.status.success(), "exit {:?}: {context}", out.status.code());
        // An OpenTSDB error in a 200 answer (e.g. put details) or a telnet error line counts as failing too.
        assert!(!stdout.contains("\"error\""), "an error answer: {context}");
        assert!(!stdout.lines().any(|l| l.starts_with("put:")), "a telnet error line: {context}");
    }
    // The /q example wrote its PNG.
    let png = std::fs::read(cwd.path().join("cpu.png")).expect("cpu.png written by the /q example");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
}

#[test]
fn skipped_blocks_say_why() {
    let readme = std::fs::read_to_string(readme_path()).unwrap();
    for line in readme.lines().filter(|l| l.contains("readme-test: skip")) {
        assert!(line.contains("skip (") && line.trim_end().ends_with(") -->"), "a skip needs its reason: {line}");
    }
}

/// The README's differences list is the one the differential and layout suites check
/// (`compat-tests/differential/differences.json`), one bullet per reason. `RTSD_UPDATE_README=1` rewrites it.
#[test]
fn the_readme_lists_every_known_difference_from_opentsdb() {
    const BEGIN: &str =
        "<!-- differences: made from compat-tests/differential/differences.json by tests/readme.rs -->\n";
    const END: &str = "<!-- /differences -->";
    let readme = std::fs::read_to_string(readme_path()).expect("README.md");
    let start = readme.find(BEGIN).expect("the README's differences list starts with its marker") + BEGIN.len();
    let end = start + readme[start..].find(END).expect("the README's differences list ends with its marker");
    let want = rtsd_compat_tests::differential::readme_list();
    if std::env::var_os("RTSD_UPDATE_README").is_some() {
        std::fs::write(readme_path(), format!("{}{want}{}", &readme[..start], &readme[end..]))
            .expect("write README.md");
        return;
    }
    assert!(want.lines().count() >= 20, "the list lost its reasons:\n{want}");
    assert_eq!(
        readme[start..end],
        want,
        "README's differences list is not differences.json's: rerun with RTSD_UPDATE_README=1 and review the diff"
    );
}
