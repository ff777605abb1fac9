//! A real Prometheus (Debian's `prometheus`) scrapes a real `parapetd`:
//! both run inside the filtered namespace of a fresh test bed, on its
//! loopback; the daemon enforces a small ruleset at tc on the bed's veth,
//! the test sends a known number of UDP datagrams from the peer namespace
//! to the rule it counts, and Prometheus' HTTP API must return exactly that
//! count for the rule's series (and zero for a rule nothing hit); then
//! `parapet top --once --json` must rank that rule first while more
//! traffic hits it; the per hook and interface series count what tc and
//! the INPUT hook saw on the veth, and exactly what they dropped. Needs
//! root (`#[ignore = "needs root"]`) and the `prometheus` binary (installed
//! by `scripts/deps.sh test`); fails without either.

mod common;

use common::daemon::parapet;
use common::prometheus::{query, spawn_in, start, wait_for};
use common::{in_netns, require_root, testbed, B_ADDR};
use std::net::{Ipv4Addr, UdpSocket};
use std::time::{Duration, Instant};

const SENT: usize = 37;
const PROBE_PORT: u16 = 5555;
/// A port rule 3 drops: the per-hook drop count must be exactly these.
const DROPPED_PORT: u16 = 5556;
const DROPPED: usize = 23;
const METRICS: &str = "127.0.0.1:9464";

fn send(ns: &str, port: u16, n: usize) {
    in_netns(ns, || {
        let s = UdpSocket::bind("0.0.0.0:0").unwrap();
        for _ in 0..n {
            s.send_to(b"metrics", (Ipv4Addr::from(B_ADDR), port))
                .unwrap();
        }
    });
}

#[test]
#[ignore = "needs root"]
fn prometheus_reads_the_rule_counters_of_known_traffic() {
    require_root();
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
             -A INPUT -p udp --dport {DROPPED_PORT} -j DROP\n\
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
    send(&bed.a, PROBE_PORT, SENT);
    send(&bed.a, DROPPED_PORT, DROPPED);
    let _prom = start(&bed.b, dir.path(), METRICS);
    let prom_log = dir.path().join("prometheus.log");
    let probe = "parapet_rule_packets_total{job=\"parapet\",rule=\"2\",chain=\"filter/INPUT\",comment=\"metrics probe\"}";
    wait_for(
        &bed.b,
        probe,
        SENT as f64,
        Duration::from_secs(90),
        &prom_log,
    );
    assert_eq!(query(&bed.b, probe), Some(SENT as f64));
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

    // Per hook and interface: tc on the bed's veth dropped exactly the
    // datagrams rule 3 drops (ARP and the like pass), and saw at least
    // every datagram sent.
    let tc = format!("hook=\"tc\",interface=\"{}\"", bed.vb);
    assert_eq!(
        query(&bed.b, &format!("parapet_hook_dropped_total{{{tc}}}")),
        Some(DROPPED as f64)
    );
    let seen = query(&bed.b, &format!("parapet_hook_packets_total{{{tc}}}")).unwrap();
    assert!(seen >= (SENT + DROPPED) as f64, "tc saw {seen}");
    assert!(
        query(&bed.b, &format!("parapet_hook_bytes_total{{{tc}}}")).unwrap()
            >= ((SENT + DROPPED) * (20 + 8 + 7)) as f64
    );

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
    send(&bed.a, PROBE_PORT, SENT);
    send(&bed.a, DROPPED_PORT, DROPPED);
    let input = "parapet_netfilter_packets_total{job=\"parapet\",hook=\"input\"}";
    wait_for(
        &bed.b,
        input,
        SENT as f64,
        Duration::from_secs(60),
        &prom_log,
    );
    // ... and per interface: the INPUT hook dropped rule 3's datagrams
    // that came in on the veth (tc dropped them first: none reach it).
    let at_input = format!("hook=\"input\",interface=\"{}\"", bed.vb);
    wait_for(
        &bed.b,
        &format!("parapet_hook_packets_total{{{at_input}}}"),
        SENT as f64,
        Duration::from_secs(60),
        &prom_log,
    );
    let stats = parapet(&sock, &["stats", "--json"]);
    let stats: serde_json::Value = serde_json::from_slice(&stats.stdout).unwrap();
    let hooks = stats["dataplane"]["hooks"].as_array().unwrap();
    let tc_row = hooks
        .iter()
        .find(|h| h["hook"] == "tc" && h["interface"] == bed.vb.as_str())
        .unwrap_or_else(|| panic!("no tc row for {}: {hooks:?}", bed.vb));
    assert_eq!(tc_row["dropped"], 2 * DROPPED as u64, "{tc_row}");
}
