//! A real Prometheus (Debian's `prometheus`) scrapes a real `parapetd`:
//! both run inside the filtered namespace of a fresh test bed, on its
//! loopback; the daemon enforces a small ruleset at tc on the bed's veth,
//! the test sends a known number of UDP datagrams from the peer namespace
//! to the rule it counts, and Prometheus' HTTP API must return exactly that
//! count for the rule's series (and zero for a rule nothing hit); then
//! `parapet top --once --json` must rank that rule first while more
//! traffic hits it. Needs
//! root (`#[ignore = "needs root"]`) and the `prometheus` binary (installed
//! by `scripts/deps.sh test`); fails without either.

mod common;

use common::daemon::parapet;
use common::{in_netns, require_root, testbed, B_ADDR};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpStream, UdpSocket};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const SENT: usize = 37;
const PROBE_PORT: u16 = 5555;
const METRICS: &str = "127.0.0.1:9464";
const PROMETHEUS: &str = "127.0.0.1:9090";

/// Kills (and reaps) a child on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn_in(ns: &str, exe: &str, args: &[&str], log: &Path) -> Proc {
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
fn get(ns: &str, addr: &'static str, target: String) -> Option<String> {
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
fn query(ns: &str, q: &str) -> Option<f64> {
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

#[test]
#[ignore = "needs root"]
fn prometheus_reads_the_rule_counters_of_known_traffic() {
    require_root();
    let prometheus = "/usr/bin/prometheus";
    assert!(
        Path::new(prometheus).is_file(),
        "{prometheus} missing: scripts/deps.sh test installs Debian's prometheus"
    );
    let bed = testbed("mp", &[]);
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("parapet.sock");
    let state = dir.path().join("state");
    let rules = dir.path().join("rules");
    std::fs::write(
        &rules,
        format!(
            "*filter\n:INPUT ACCEPT [0:0]\n\
             -A INPUT -p tcp --dport 22 -j ACCEPT\n\
             -A INPUT -p udp --dport {PROBE_PORT} -m comment --comment \"metrics probe\" -j ACCEPT\n\
             COMMIT\n"
        ),
    )
    .unwrap();
    // parapet under the name parapetd runs the same parapetd_main, and is
    // always as new as this test (target/*/parapetd may be stale).
    let link = dir.path().join("parapetd");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_parapet"), &link).unwrap();
    let exe = link.display().to_string();
    let _daemon = spawn_in(
        &bed.b,
        &exe,
        &[
            "--socket",
            sock.to_str().unwrap(),
            "--state-dir",
            state.to_str().unwrap(),
            "--no-fsync",
            "--max-rules",
            "300",
            "--metrics",
            METRICS,
        ],
        &dir.path().join("parapetd.log"),
    );
    let t0 = Instant::now();
    while !parapet(&sock, &["stats", "--json"]).status.success() {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "parapetd did not come up: {}",
            std::fs::read_to_string(dir.path().join("parapetd.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    for args in [
        vec!["apply", rules.to_str().unwrap()],
        vec!["attach", bed.vb.as_str(), "--hook", "tc"],
    ] {
        let o = parapet(&sock, &args);
        assert!(
            o.status.success(),
            "parapet {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    in_netns(&bed.a, || {
        let s = UdpSocket::bind("0.0.0.0:0").unwrap();
        for _ in 0..SENT {
            s.send_to(b"metrics", (Ipv4Addr::from(B_ADDR), PROBE_PORT))
                .unwrap();
        }
    });
    let conf = dir.path().join("prometheus.yml");
    std::fs::write(
        &conf,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             scrape_configs:\n  - job_name: parapet\n    static_configs:\n      - targets: ['{METRICS}']\n"
        ),
    )
    .unwrap();
    let data = dir.path().join("tsdb");
    let _prom = spawn_in(
        &bed.b,
        prometheus,
        &[
            &format!("--config.file={}", conf.display()),
            &format!("--storage.tsdb.path={}", data.display()),
            &format!("--web.listen-address={PROMETHEUS}"),
        ],
        &dir.path().join("prometheus.log"),
    );
    let probe = "parapet_rule_packets_total{job=\"parapet\",rule=\"2\",chain=\"filter/INPUT\",comment=\"metrics probe\"}";
    let t0 = Instant::now();
    let mut last = None;
    while last != Some(SENT as f64) {
        assert!(
            t0.elapsed() < Duration::from_secs(90),
            "Prometheus never read {SENT} for rule 2 (last: {last:?}); prometheus.log:\n{}",
            std::fs::read_to_string(dir.path().join("prometheus.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(500));
        last = query(&bed.b, probe);
    }
    assert_eq!(
        query(
            &bed.b,
            "parapet_rule_packets_total{job=\"parapet\",rule=\"1\"}"
        ),
        Some(0.0)
    );
    assert_eq!(
        query(&bed.b, "parapet_rule_bytes_total{rule=\"2\"}"),
        // IPv4 20 + UDP 8 + 7 payload bytes (the kernel counts from the IP header).
        Some((SENT * (20 + 8 + 7)) as f64)
    );
    assert_eq!(query(&bed.b, "up{job=\"parapet\"}"), Some(1.0));

    // `parapet top --once --json` sees the rule traffic hits now: more
    // datagrams during its 2 s interval put rule 2 first, by packets/s.
    let more = 60;
    let a = bed.a.clone();
    let sender = std::thread::spawn(move || {
        in_netns(&a, || {
            let s = UdpSocket::bind("0.0.0.0:0").unwrap();
            for _ in 0..more {
                s.send_to(b"metrics", (Ipv4Addr::from(B_ADDR), PROBE_PORT))
                    .unwrap();
                std::thread::sleep(Duration::from_millis(15));
            }
        })
    });
    let o = parapet(&sock, &["top", "--once", "--json", "--interval", "2"]);
    sender.join().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let top: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let first = &top["rules"][0];
    assert_eq!(first["rule"], 2, "{top}");
    assert_eq!(
        first["text"],
        format!(
            "-A INPUT -p udp --dport {PROBE_PORT} -m comment --comment \"metrics probe\" -j ACCEPT"
        )
    );
    assert!(first["packets_per_s"].as_f64().unwrap() > 5.0, "{top}");
    assert!(first["packets"].as_u64().unwrap() > SENT as u64, "{top}");
    assert_eq!(top["kernel"], true);

    // At the netfilter hooks too: the INPUT hook's packets are a series.
    let o = parapet(&sock, &["attach"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    in_netns(&bed.a, || {
        let s = UdpSocket::bind("0.0.0.0:0").unwrap();
        for _ in 0..SENT {
            s.send_to(b"metrics", (Ipv4Addr::from(B_ADDR), PROBE_PORT))
                .unwrap();
        }
    });
    let input = "parapet_netfilter_packets_total{job=\"parapet\",hook=\"input\"}";
    let t0 = Instant::now();
    while query(&bed.b, input).is_none_or(|v| v < SENT as f64) {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "Prometheus never read {SENT} packets at the INPUT hook (last: {:?})",
            query(&bed.b, input)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}
