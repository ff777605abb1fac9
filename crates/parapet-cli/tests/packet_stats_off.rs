//! The per-packet statistics switch end to end: `parapetd --no-packet-stats`
//! and `parapet run --no-packet-stats` in a fresh network namespace, UDP
//! datagrams sent over a veth pair at XDP. The rule counters must count
//! every datagram; the packets-seen, image-decided and per-hook counts must
//! not move; `stats` (JSON and text) and `run`'s report must say the
//! statistics are off. Needs root (`#[ignore = "needs root"]`).

mod common;

use common::daemon::{ok, parapet, parapetd, start_parapetd_in, stat_counters, stats};
use common::{in_netns, require_root, testbed, Bed, B_ADDR};
use std::net::{Ipv4Addr, UdpSocket};
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// Rule 1 drops datagrams to `DROPPED`, rule 2 accepts those to `PASSED`
/// (ports below the test bed's ephemeral range).
const DROPPED: u16 = 40901;
const PASSED: u16 = 40902;
/// Datagrams sent to each port.
const SENT: u64 = 12;

fn ruleset_text() -> String {
    format!(
        "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -p udp --dport {DROPPED} -j DROP\n\
         -A INPUT -p udp --dport {PASSED} -j ACCEPT\nCOMMIT\n"
    )
}

/// `SENT` datagrams from the peer namespace to each of the two ports.
fn send(bed: &Bed) {
    in_netns(&bed.a, || {
        let s = UdpSocket::bind(("0.0.0.0", 0)).unwrap();
        for _ in 0..SENT {
            for port in [DROPPED, PASSED] {
                s.send_to(b"stats off", (Ipv4Addr::from(B_ADDR), port))
                    .unwrap();
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    });
}

/// Waits (at most 30 s) until `counted` says both rules counted `SENT`.
fn wait_counted(what: &str, mut counted: impl FnMut() -> (u64, u64)) {
    let t0 = Instant::now();
    loop {
        let got = counted();
        if got == (SENT, SENT) {
            return;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "{what}: rule counters {got:?}, want ({SENT}, {SENT})"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Stops parapetd when the test ends, failed or not.
struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = Command::new("kill").arg(self.0.id().to_string()).status();
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(20) {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `parapetd --no-packet-stats` in namespace `ns`; waits for its socket.
fn start_daemon(ns: &str, exe: &Path, sock: &Path, state: &Path, log: &Path) -> Daemon {
    let flags = ["--max-rules", "16", "--no-hook-images", "--no-packet-stats"];
    Daemon(start_parapetd_in(ns, exe, sock, state, log, &flags))
}

#[test]
#[ignore = "needs root"]
fn parapetd_without_packet_stats_counts_rules_only() {
    require_root();
    let bed = testbed("ps", &[]);
    let dir = tempfile::tempdir().unwrap();
    let (sock, state, log) = (
        dir.path().join("s"),
        dir.path().join("state"),
        dir.path().join("parapetd.log"),
    );
    let rules = dir.path().join("r.rules");
    std::fs::write(&rules, ruleset_text()).unwrap();
    let exe = parapetd(dir.path());
    let daemon = start_daemon(&bed.b, &exe, &sock, &state, &log);
    let s = stats(&sock);
    assert_eq!(s["dataplane"]["packet_stats"], false, "before load: {s}");
    ok(&sock, &["apply", rules.to_str().unwrap()]);
    let o = parapet(&sock, &["attach", &bed.vb, "--hook", "xdp"]);
    assert!(
        o.status.success(),
        "parapet attach: {}",
        String::from_utf8_lossy(&o.stderr)
    );

    send(&bed);
    wait_counted("parapetd", || {
        let c = stat_counters(&stats(&sock));
        (
            c.get(&1).copied().unwrap_or(0),
            c.get(&2).copied().unwrap_or(0),
        )
    });
    let s = stats(&sock);
    let dp = &s["dataplane"];
    assert_eq!(dp["packet_stats"], false, "{s}");
    assert_eq!(dp["kernel"]["packets"], 0, "packets seen moved: {s}");
    assert_eq!(dp["kernel"]["by_image"], 0, "image-decided moved: {s}");
    for h in dp["hooks"].as_array().unwrap() {
        assert_eq!(h["packets"], 0, "a per-hook count moved: {s}");
    }
    let human = ok(&sock, &["stats"]);
    assert!(
        human.contains("per-packet statistics: off"),
        "`stats` does not say so: {human}"
    );

    // The pinned program goes with --remove-pinned (it keeps enforcing
    // across a stop otherwise), leaving the interface to `parapet run`.
    drop(daemon);
    let o = Command::new("ip")
        .args(["netns", "exec", &bed.b])
        .arg(&exe)
        .arg("--state-dir")
        .arg(&state)
        .arg("--remove-pinned")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    // `parapet run --no-packet-stats`: the same, in its report.
    let pidfile = dir.path().join("run.pid");
    let o = Command::new("ip")
        .args([
            "netns",
            "exec",
            &bed.b,
            env!("CARGO_BIN_EXE_parapet"),
            "run",
        ])
        .arg(&rules)
        .args([
            "--iface",
            &bed.vb,
            "--hook",
            "xdp",
            "--json",
            "--seconds",
            "120",
        ])
        .arg("--no-packet-stats")
        .arg("--background")
        .arg(&pidfile)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    send(&bed);
    // `run` reports once, at the end: give the datagrams time to land
    std::thread::sleep(Duration::from_millis(1000));
    let o = Command::new(env!("CARGO_BIN_EXE_parapet"))
        .arg("stop")
        .arg(&pidfile)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(o.status.success(), "{said}");
    let report: serde_json::Value = said
        .lines()
        .find(|l| l.starts_with('{'))
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("no JSON report in: {said}"));
    assert_eq!(report["packet_stats"], false, "{report}");
    assert_eq!(report["packets"], 0, "packets seen moved: {report}");
    assert_eq!(report["by_image"], 0, "image-decided moved: {report}");
    let rule = |id: u64| {
        report["rules"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["rule"] == id)
            .map_or(0, |r| r["packets"].as_u64().unwrap())
    };
    assert_eq!((rule(1), rule(2)), (SENT, SENT), "{report}");
}
