//! Records the build facts that `version` and `/api/version` report (spec: query §6.10).
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    let rev = git(&["rev-parse", "HEAD"]).unwrap_or_else(|| "0000000000000000000000000000000000000000".into());
    let branch = git(&["rev-parse", "--abbrev-ref", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let modified = git(&["status", "--porcelain", "--untracked-files=no"]).map(|s| !s.is_empty()).unwrap_or(false);
    let time = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let user = std::env::var("USER").unwrap_or_else(|_| "rtsd".into());
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").map(|s| s.trim().to_string()).unwrap_or_default();
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    println!("cargo:rustc-env=RTSD_GIT_REV={rev}");
    println!("cargo:rustc-env=RTSD_GIT_BRANCH={branch}");
    println!("cargo:rustc-env=RTSD_REPO_STATUS={}", if modified { "MODIFIED" } else { "MINT" });
    println!("cargo:rustc-env=RTSD_BUILD_TIME={time}");
    println!("cargo:rustc-env=RTSD_BUILD_USER={user}");
    println!("cargo:rustc-env=RTSD_BUILD_HOST={host}");
    println!("cargo:rustc-env=RTSD_BUILD_DIR={dir}");
    // Only a new commit changes the facts worth rebuilding for; editing sources must not rerun this script.
    // Ask git where HEAD and its reflog live: in a linked worktree `.git` is a file, and a watched path that does not
    // exist would rerun this script (and recompile the crate) on every build. This checkout's reflog gets a line
    // for each commit and checkout here and for no other worktree's (watching all of `refs/heads` rebuilt the crate
    // whenever a commit landed on another worktree's branch, in the middle of a test run too).
    let git_dir = git(&["rev-parse", "--absolute-git-dir"]);
    let common_dir = git(&["rev-parse", "--path-format=absolute", "--git-common-dir"]);
    let branch_ref = git(&["symbolic-ref", "-q", "HEAD"]);
    if let (Some(git_dir), Some(common_dir)) = (git_dir, common_dir) {
        println!("cargo:rerun-if-changed={git_dir}/HEAD");
        let reflog = format!("{git_dir}/logs/HEAD");
        let loose = branch_ref.map(|r| format!("{common_dir}/{r}"));
        if std::path::Path::new(&reflog).exists() {
            println!("cargo:rerun-if-changed={reflog}");
        } else if let Some(loose) = loose.filter(|l| std::path::Path::new(l).exists()) {
            println!("cargo:rerun-if-changed={loose}");
        } else {
            println!("cargo:rerun-if-changed={common_dir}/packed-refs");
        }
    } else {
        println!("cargo:rerun-if-changed=build.rs");
    }
}
