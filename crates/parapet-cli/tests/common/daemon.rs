//! Driving a real parapetd through the real `parapet` CLI.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

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
