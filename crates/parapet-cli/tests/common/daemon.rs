//! Driving a real parapetd through the real `parapet` CLI.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `parapet --socket SOCK args…`.
pub fn parapet(sock: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_parapet"))
        .arg("--socket")
        .arg(sock)
        .args(args)
        .output()
        .unwrap()
}

/// [`parapet`], asserting success; its stdout.
pub fn ok(sock: &Path, args: &[&str]) -> String {
    let o = parapet(sock, args);
    assert!(
        o.status.success(),
        "parapet {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).to_string()
}

/// The daemon executable: the real `parapetd` when it was built with this
/// `parapet`, else `parapet` itself under the name `parapetd` (the same
/// `parapetd_main`).
pub fn parapetd(dir: &Path) -> PathBuf {
    let cli = PathBuf::from(env!("CARGO_BIN_EXE_parapet"));
    let real = cli.with_file_name("parapetd");
    let mtime = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    if mtime(&real).is_some() && mtime(&real) >= mtime(&cli) {
        return real;
    }
    let link = dir.join("parapetd");
    let _ = std::os::unix::fs::symlink(&cli, &link);
    link
}

/// `parapet stats --json`.
pub fn stats(sock: &Path) -> serde_json::Value {
    serde_json::from_str(&ok(sock, &["stats", "--json"])).unwrap()
}

/// Per-rule counters from `stats` (rule 0 = policy).
pub fn stat_counters(s: &serde_json::Value) -> HashMap<u32, u64> {
    s["counters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["rule"].as_u64().unwrap() as u32,
                c["packets"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// `parapet detach` without an interface, and no attachment left.
pub fn detach_all(sock: &Path) {
    ok(sock, &["detach"]);
    let s = stats(sock);
    assert_eq!(
        s["dataplane"]["attachments"].as_array().map(Vec::len),
        Some(0),
        "{s}"
    );
}

/// Starts `exe` (a parapetd, see [`parapetd`]) in the network namespace
/// `ns` (`ip netns exec`) on socket `sock` and state directory `state`,
/// with `--no-fsync` and `flags`; its stderr is appended to `log` (a
/// restart adds to it). Waits for its socket: up to 120 s, as a start
/// that adopts pinned state loads and verifies the BPF programs first
/// (38 s measured at a load of 16 on 2 cores).
pub fn start_parapetd_in(
    ns: &str,
    exe: &Path,
    sock: &Path,
    state: &Path,
    log: &Path,
    flags: &[&str],
) -> Child {
    let _ = std::fs::remove_file(sock);
    let err = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap();
    let mut child = Command::new("ip")
        .args(["netns", "exec", ns])
        .arg(exe)
        .arg("--socket")
        .arg(sock)
        .arg("--state-dir")
        .arg(state)
        .arg("--no-fsync")
        .args(flags)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(err)
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !parapet(sock, &["stats", "--json"]).status.success() {
        if t0.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "parapetd did not come up: {}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child
}
