//! A real Prometheus (Debian's `prometheus`) next to a parapetd under
//! test: processes started inside a test namespace, HTTP on that
//! namespace's loopback, and Prometheus' instant queries.

use super::in_netns;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Where the test's Prometheus listens (inside the test namespace).
pub const PROMETHEUS: &str = "127.0.0.1:9090";
/// The Prometheus binary; `scripts/deps.sh test` installs it.
pub const PROMETHEUS_BIN: &str = "/usr/bin/prometheus";

/// Kills (and reaps) a child on drop.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `exe args` inside namespace `ns` (`ip netns exec`, which execs it: the
/// child's pid is the program's), stderr into `log`.
pub fn spawn_in(ns: &str, exe: &str, args: &[&str], log: &Path) -> Proc {
    let err = std::fs::File::create(log).unwrap();
    Proc(
        Command::new("ip")
            .args(["netns", "exec", ns, exe])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("ip netns exec {exe}: {e}")),
    )
}

/// One GET on loopback inside namespace `ns`; the body.
pub fn get(ns: &str, addr: &'static str, target: String) -> Option<String> {
    in_netns(ns, move || {
        let mut s = TcpStream::connect(addr).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
        write!(
            s,
            "GET {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
        )
        .ok()?;
        let mut out = String::new();
        s.read_to_string(&mut out).ok()?;
        Some(out.split_once("\r\n\r\n")?.1.to_string())
    })
}

/// The value Prometheus' instant query `q` returns for its one series.
pub fn query(ns: &str, q: &str) -> Option<f64> {
    let enc: String = q
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    // The body may be chunked: take the JSON object between the braces.
    let body = get(ns, PROMETHEUS, format!("/api/v1/query?query={enc}"))?;
    let json = &body[body.find('{')?..=body.rfind('}')?];
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    let result = v["data"]["result"].as_array()?;
    if result.len() != 1 {
        return None;
    }
    result[0]["value"][1].as_str()?.parse().ok()
}

/// Prometheus in namespace `ns`, scraping `target` (job `parapet`) every
/// second, its data and log in `dir`.
pub fn start(ns: &str, dir: &Path, target: &str) -> Proc {
    assert!(
        Path::new(PROMETHEUS_BIN).is_file(),
        "{PROMETHEUS_BIN} missing: scripts/deps.sh test installs Debian's prometheus"
    );
    let conf = dir.join("prometheus.yml");
    std::fs::write(
        &conf,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             scrape_configs:\n  - job_name: parapet\n    static_configs:\n      - targets: ['{target}']\n"
        ),
    )
    .unwrap();
    let data = dir.join("tsdb");
    spawn_in(
        ns,
        PROMETHEUS_BIN,
        &[
            &format!("--config.file={}", conf.display()),
            &format!("--storage.tsdb.path={}", data.display()),
            &format!("--web.listen-address={PROMETHEUS}"),
        ],
        &dir.join("prometheus.log"),
    )
}

/// Waits (at most `limit`) until query `q` returns at least `want`; the
/// last value read.
pub fn wait_for(ns: &str, q: &str, want: f64, limit: Duration, log: &Path) -> f64 {
    let t0 = std::time::Instant::now();
    loop {
        let v = query(ns, q);
        if v.is_some_and(|v| v >= want) {
            return v.unwrap();
        }
        assert!(
            t0.elapsed() < limit,
            "Prometheus never read {want} for {q} (last: {v:?}); {}:\n{}",
            log.display(),
            std::fs::read_to_string(log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}
