//! Ban throughput with and without the kernel dataplane attached: what
//! mirroring every ban into the BPF set maps before the reply costs.
//!
//! `cargo bench -p parapet-bench-micro --bench ban_dataplane -- [N] [RUNS]`
//! (root). The process moves itself into a new network namespace, runs the
//! daemon in-process (fsync on, state in a temporary directory), applies a
//! ruleset that drops `parapet-ban4` sources and, for the "attached" runs,
//! attaches the program to that namespace's `lo` at tc. Then N
//! single-address `ban` requests are pipelined over one connection.
//! Alternates detached and attached runs; prints one JSON line per run
//! and the medians.

#[path = "common/ban_runs.rs"]
mod ban_runs;

use parapet_daemon::{Client, Config, Daemon};
use serde_json::json;
use std::net::Ipv4Addr;
use std::time::Instant;

const RULES: &str =
    "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -m set --match-set parapet-ban4 src -j DROP\nCOMMIT\n";

fn run(n: usize, attach: bool) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("s");
    let d = Daemon::start(
        Config::new(&sock, dir.path().join("state")),
        parapet_daemon::server::default_loader(),
    )
    .expect("start the daemon");
    let mut c = Client::connect(&sock).unwrap();
    c.call(json!({"cmd": "ban", "elems": ["10.255.255.254"]}))
        .unwrap();
    c.call(json!({"cmd": "apply", "rules": RULES, "name": "bench.rules"}))
        .unwrap();
    if attach {
        c.call(json!({"cmd": "attach", "iface": "lo", "hook": "tc"}))
            .expect("attach (root, BPF)");
    }
    let lines: Vec<Vec<u8>> = (0..n)
        .map(|i| {
            let a = Ipv4Addr::from(0x0a00_0000u32 + i as u32);
            format!("{{\"v\":1,\"id\":{i},\"cmd\":\"ban\",\"elems\":[\"{a}\"],\"timeout\":3600}}\n")
                .into_bytes()
        })
        .collect();
    let t0 = Instant::now();
    let replies = c.pipeline(lines).unwrap();
    let secs = t0.elapsed().as_secs_f64();
    assert!(replies.iter().all(|r| r.ok()), "every ban acknowledged");
    let rate = n as f64 / secs;
    println!(
        "{}",
        json!({"attached": attach, "bans": n, "secs": secs, "requests_per_sec": rate})
    );
    drop(c);
    drop(d);
    rate
}

fn main() {
    let (n, runs) = ban_runs::n_and_runs(100_000, 3);
    if !ban_runs::own_netns() {
        return;
    }
    let (mut off, mut on) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        off.push(run(n, false));
        on.push(run(n, true));
    }
    let (m0, lo0, hi0) = ban_runs::median(off);
    let (m1, lo1, hi1) = ban_runs::median(on);
    println!(
        "{}",
        json!({"bans": n, "runs": runs,
            "detached_median": m0, "detached_min": lo0, "detached_max": hi0,
            "attached_median": m1, "attached_min": lo1, "attached_max": hi1,
            "attached_over_detached": m1 / m0})
    );
}
