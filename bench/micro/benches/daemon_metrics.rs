//! Does scraping `/metrics` slow the ban path? Ban throughput of one
//! daemon holding a 25,600-rule ruleset enforced at tc and 1 M set
//! elements, not scraped, scraped every second, and scraped back to back.
//!
//! `cargo bench -p parapet-bench-micro --bench daemon_metrics -- [N] [RUNS]`
//! (root). The process moves itself into a new network namespace, runs the
//! daemon in-process (fsync on, `--metrics 127.0.0.1:0`), creates a set of
//! 1,000,000 IPv4 addresses, applies 25,599 address/port rules plus one
//! that drops `parapet-ban4` sources (so every scrape reads 25,601 kernel
//! counters), and attaches the program to the namespace's `lo` at tc. Each
//! run pipelines N single-address `ban` requests over one connection;
//! the three modes alternate within each round. Prints one JSON line per
//! run (with the scrapes it saw and their latency) and the medians.

#[path = "common/ban_runs.rs"]
mod ban_runs;

use parapet_daemon::metrics::MetricsConfig;
use parapet_daemon::{Client, Config, Daemon};
use serde_json::json;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const RULES: usize = 25_600;
const ELEMENTS: usize = 1_000_000;

fn ruleset() -> String {
    let mut s = String::from("*filter\n:INPUT ACCEPT [0:0]\n");
    s.push_str("-A INPUT -m set --match-set parapet-ban4 src -j DROP\n");
    s.push_str("-A INPUT -m set --match-set big src -j DROP\n");
    for i in 0..RULES - 2 {
        let a = Ipv4Addr::from(0xc612_0000u32 + i as u32); // 198.18.0.0/15
        let port = 1024 + (i % 60_000);
        s.push_str(&format!(
            "-A INPUT -s {a}/32 -p tcp --dport {port} -m comment --comment \"rule {i}\" -j DROP\n"
        ));
    }
    s.push_str("COMMIT\n");
    s
}

fn scrape(addr: SocketAddr) -> (Duration, usize) {
    let t0 = Instant::now();
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    assert!(out.starts_with(b"HTTP/1.1 200"));
    (t0.elapsed(), out.len())
}

/// Scrapes every `every` (back to back when zero) until `stop`.
fn scraper(addr: SocketAddr, every: Duration, stop: Arc<AtomicBool>) -> Vec<(Duration, usize)> {
    let mut seen = Vec::new();
    while !stop.load(Ordering::SeqCst) {
        let t = Instant::now();
        seen.push(scrape(addr));
        while !every.is_zero() && t.elapsed() < every && !stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    seen
}

fn main() {
    let (n, runs) = ban_runs::n_and_runs(1_000_000, 3);
    if !ban_runs::own_netns() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("s");
    let mut cfg = Config::new(&sock, dir.path().join("state"));
    cfg.metrics = MetricsConfig {
        listen: Some("127.0.0.1:0".parse().unwrap()),
        ..MetricsConfig::default()
    };
    cfg.kernel.image_mib = 64;
    cfg.snapshot_bytes = 1 << 40; // no snapshot in the middle of a run
    let d = Daemon::start(cfg, parapet_daemon::server::default_loader()).expect("start");
    let addr = d.metrics_addr.unwrap();
    let mut c = Client::connect(&sock).unwrap();
    c.call(json!({"cmd": "set.create", "set": "big", "type": "ipv4_addr"}))
        .unwrap();
    let t0 = Instant::now();
    let chunks: Vec<Vec<u8>> = (0..ELEMENTS)
        .collect::<Vec<_>>()
        .chunks(65_536)
        .enumerate()
        .map(|(k, ch)| {
            let elems: Vec<String> = ch
                .iter()
                .map(|i| Ipv4Addr::from(0x6400_0000u32 + *i as u32).to_string())
                .collect();
            let mut l = serde_json::to_vec(
                &json!({"v": 1, "id": 1_000_000 + k, "cmd": "set.add", "set": "big", "elems": elems}),
            )
            .unwrap();
            l.push(b'\n');
            l
        })
        .collect();
    assert!(c.pipeline(chunks).unwrap().iter().all(|r| r.ok()));
    c.call(json!({"cmd": "ban", "elems": ["10.255.255.254"]}))
        .unwrap();
    c.call(json!({"cmd": "apply", "rules": ruleset(), "name": "bench.rules"}))
        .expect("apply 25,600 rules");
    c.call(json!({"cmd": "attach", "iface": "lo", "hook": "tc"}))
        .expect("attach (root, BPF)");
    let (t, bytes) = scrape(addr);
    eprintln!(
        "set-up {:.1} s; one scrape: {:.1} ms, {bytes} bytes",
        t0.elapsed().as_secs_f64(),
        t.as_secs_f64() * 1e3
    );
    let modes: [(&str, Option<Duration>); 3] = [
        ("none", None),
        ("every_1s", Some(Duration::from_secs(1))),
        ("back_to_back", Some(Duration::ZERO)),
    ];
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    let mut next = 0u32;
    for round in 0..runs {
        for (m, (mode, every)) in modes.iter().enumerate() {
            let lines: Vec<Vec<u8>> = (0..n)
                .map(|i| {
                    let a = Ipv4Addr::from(0x0a00_0000u32 + next + i as u32);
                    format!("{{\"v\":1,\"id\":{i},\"cmd\":\"ban\",\"elems\":[\"{a}\"],\"timeout\":3600}}\n")
                        .into_bytes()
                })
                .collect();
            next += n as u32;
            let stop = Arc::new(AtomicBool::new(false));
            let h = every.map(|e| {
                let s = stop.clone();
                std::thread::spawn(move || scraper(addr, e, s))
            });
            let t0 = Instant::now();
            let replies = c.pipeline(lines).unwrap();
            let secs = t0.elapsed().as_secs_f64();
            stop.store(true, Ordering::SeqCst);
            let seen = h.map(|h| h.join().unwrap()).unwrap_or_default();
            assert!(replies.iter().all(|r| r.ok()), "every ban acknowledged");
            let rate = n as f64 / secs;
            rates[m].push(rate);
            let lat: Vec<f64> = seen.iter().map(|s| s.0.as_secs_f64() * 1e3).collect();
            let lat_med = if lat.is_empty() {
                0.0
            } else {
                ban_runs::median(lat).0
            };
            println!(
                "{}",
                json!({"round": round, "mode": mode, "bans": n, "secs": secs,
                    "requests_per_sec": rate, "scrapes": seen.len(), "scrape_ms_median": lat_med})
            );
        }
    }
    let mut summary = serde_json::Map::new();
    summary.insert("bans".into(), json!(n));
    summary.insert("runs".into(), json!(runs));
    for (m, (mode, _)) in modes.iter().enumerate() {
        let (med, lo, hi) = ban_runs::median(rates[m].clone());
        summary.insert(format!("{mode}_median"), json!(med));
        summary.insert(format!("{mode}_min"), json!(lo));
        summary.insert(format!("{mode}_max"), json!(hi));
    }
    println!("{}", serde_json::Value::Object(summary));
    drop(c);
    drop(d);
}
