//! Prometheus metrics without the kernel: a daemon in this process with
//! `--metrics 127.0.0.1:0` and `--metrics-textfile`, driven over its
//! socket; the scrape must show exactly the bans, set changes and applies
//! made, in the exposition format, and the listener must refuse what is
//! not `GET /metrics` and stay within its bounds. (A real Prometheus
//! scraping kernel counters: `parapet-cli`'s `metrics_prometheus` test.)

use parapet_daemon::metrics::MetricsConfig;
use parapet_daemon::{Client, Config, Daemon};
use serde_json::json;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

fn http(addr: SocketAddr, request: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).expect("connect to --metrics");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

fn scrape(addr: SocketAddr) -> String {
    let r = http(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
    assert!(r.contains("Content-Type: text/plain; version=0.0.4"), "{r}");
    r.split_once("\r\n\r\n").unwrap().1.to_string()
}

/// The value of the one sample `series` (name and labels as written).
fn value(text: &str, series: &str) -> f64 {
    let v = maybe(text, series);
    v.unwrap_or_else(|| panic!("no single `{series}` in:\n{text}"))
}

fn maybe(text: &str, series: &str) -> Option<f64> {
    let hits: Vec<f64> = text
        .lines()
        .filter_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .collect();
    (hits.len() == 1).then(|| hits[0])
}

fn start(dir: &std::path::Path, metrics: MetricsConfig) -> std::io::Result<Daemon> {
    let mut c = Config::new(dir.join("s.sock"), dir.join("state"));
    c.fsync = false;
    c.metrics = metrics;
    Daemon::start(c, parapet_daemon::server::default_loader())
}

#[test]
fn a_scrape_counts_what_clients_did() {
    let dir = tempfile::tempdir().unwrap();
    let files = dir.path().join("textfile");
    let d = start(
        dir.path(),
        MetricsConfig {
            listen: Some("127.0.0.1:0".parse().unwrap()),
            textfile: Some(files.clone()),
            textfile_interval: Duration::from_millis(200),
            max_rule_series: 2,
            ..MetricsConfig::default()
        },
    )
    .unwrap();
    let addr = d.metrics_addr.expect("bound");
    assert!(addr.ip().is_loopback());
    let mut c = Client::connect(&dir.path().join("s.sock")).unwrap();
    let ok = |c: &mut Client, v: serde_json::Value| {
        c.call(v.clone()).unwrap_or_else(|e| panic!("{v}: {e:?}"));
    };
    let before = scrape(addr);
    assert_eq!(value(&before, "parapet_bans_total"), 0.0);
    assert_eq!(
        value(
            &before,
            &format!(
                "parapet_build_info{{version=\"{}\"}}",
                env!("CARGO_PKG_VERSION")
            )
        ),
        1.0
    );
    ok(
        &mut c,
        json!({"cmd": "ban", "elems": ["192.0.2.1", "192.0.2.2", "192.0.2.3", "2001:db8::1"], "timeout": 3600}),
    );
    ok(
        &mut c,
        json!({"cmd": "ban", "elems": ["192.0.2.1"], "timeout": 3600}),
    ); // not new
    ok(&mut c, json!({"cmd": "unban", "elems": ["192.0.2.2"]}));
    ok(
        &mut c,
        json!({"cmd": "ban", "elems": ["192.0.2.9"], "timeout": 1}),
    );
    let rules = "*filter\n:INPUT ACCEPT [0:0]\n\
        -A INPUT -i lo -j ACCEPT\n\
        -A INPUT -p tcp --dport 22 -m comment --comment \"ssh from 198.51.100.7\" -j ACCEPT\n\
        -A INPUT -p udp --dport 53 -j ACCEPT\n\
        -A INPUT -m set --match-set parapet-ban4 src -j DROP\nCOMMIT\n";
    ok(&mut c, json!({"cmd": "apply", "rules": rules, "name": "r"}));
    let bad = c.call(
        json!({"cmd": "apply", "rules": "*filter\n-A NOPE -j WHAT\nCOMMIT\n", "name": "bad"}),
    );
    assert!(bad.is_err());
    // Let the 1 s ban expire and be reaped (the reaper runs every 250 ms).
    let t0 = Instant::now();
    let text = loop {
        let t = scrape(addr);
        // Scrapes within a second get the same collection: poll.
        if maybe(&t, "parapet_set_expiries_total{set=\"parapet-ban4\"}") >= Some(1.0) {
            break t;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "no expiry:\n{t}");
        std::thread::sleep(Duration::from_millis(100));
    };
    for (series, want) in [
        ("parapet_bans_total", 5.0),
        ("parapet_unbans_total", 1.0),
        ("parapet_set_inserts_total{set=\"parapet-ban4\"}", 4.0),
        ("parapet_set_deletes_total{set=\"parapet-ban4\"}", 1.0),
        ("parapet_set_elements{set=\"parapet-ban4\"}", 2.0),
        ("parapet_set_elements{set=\"parapet-ban6\"}", 1.0),
        ("parapet_applies_total", 1.0),
        ("parapet_apply_failures_total", 1.0),
        ("parapet_ruleset_generation", 1.0),
        ("parapet_ruleset_rules", 4.0),
    ] {
        assert_eq!(value(&text, series), want, "{series}");
    }
    assert!(value(&text, "parapet_apply_last_duration_seconds") > 0.0);
    assert!(value(&text, "parapet_requests_total") >= 6.0);
    // Journal syncs happened (fsync off still writes and is timed).
    let n = value(&text, "parapet_journal_fsync_duration_seconds_count");
    assert!(n >= 1.0, "{text}");
    assert_eq!(
        value(
            &text,
            "parapet_journal_fsync_duration_seconds_bucket{le=\"+Inf\"}"
        ),
        n
    );
    // Without the kernel dataplane there are no per-rule counters.
    assert_eq!(value(&text, "parapet_dataplane_loaded"), 0.0);
    assert!(!text.contains("parapet_rule_packets_total{"));
    // Every family has HELP and TYPE, every sample a known family, and no
    // label value is an address.
    let mut families = std::collections::HashSet::new();
    for l in text.lines() {
        if let Some(r) = l.strip_prefix("# TYPE ") {
            families.insert(r.split(' ').next().unwrap().to_string());
        } else if !l.starts_with('#') {
            let name = l.split(['{', ' ']).next().unwrap();
            let base = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| name.strip_suffix(s).filter(|b| families.contains(*b)))
                .unwrap_or(name);
            assert!(families.contains(base), "sample without TYPE: {l}");
            assert!(name.starts_with("parapet_"), "{l}");
            assert!(!l.contains("192.0.2.") && !l.contains("2001:db8"), "{l}");
        }
    }
    // The text file says the same, written atomically.
    let t0 = Instant::now();
    let file = loop {
        let f = std::fs::read_to_string(files.join("parapet.prom")).unwrap_or_default();
        if f.contains("parapet_applies_total 1") {
            break f;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "textfile not written"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(value(&file, "parapet_bans_total"), 5.0);
    let leftovers: Vec<_> = std::fs::read_dir(&files)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(leftovers.len() <= 2, "{leftovers:?}");
}

#[test]
fn the_listener_answers_only_metrics_and_stays_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let d = start(
        dir.path(),
        MetricsConfig {
            listen: Some("127.0.0.1:0".parse().unwrap()),
            ..MetricsConfig::default()
        },
    )
    .unwrap();
    let addr = d.metrics_addr.unwrap();
    assert!(http(addr, b"GET / HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404"));
    assert!(http(addr, b"POST /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405"));
    let head = http(addr, b"HEAD /metrics HTTP/1.1\r\n\r\n");
    assert!(
        head.starts_with("HTTP/1.1 200") && head.ends_with("\r\n\r\n"),
        "{head}"
    );
    // An endless header is cut off, not buffered.
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let junk = vec![b'a'; 64 * 1024];
    let _ = s.write_all(b"GET /metrics HTTP/1.1\r\nX: ");
    let _ = s.write_all(&junk);
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    assert!(out.is_empty() || out.starts_with("HTTP/1.1 431"), "{out}");
    // Silent clients hold at most MAX_CONNECTIONS slots; with them all
    // taken a scrape is refused, and once they time out it is served.
    // (A connection's slot is freed just after the client saw its answer:
    // let the ones above finish first.)
    std::thread::sleep(Duration::from_millis(300));
    let idle: Vec<TcpStream> = (0..parapet_daemon::metrics_http::MAX_CONNECTIONS)
        .map(|_| TcpStream::connect(addr).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    for s in &idle {
        // Still open: a read would block (a refused one reads EOF).
        s.set_nonblocking(true).unwrap();
        let e = (&*s).read(&mut [0u8; 1]).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock);
    }
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = s.write_all(b"GET /metrics HTTP/1.1\r\n\r\n");
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    assert!(out.is_empty(), "served beyond the connection cap: {out}");
    std::thread::sleep(parapet_daemon::metrics_http::READ_TIMEOUT + Duration::from_secs(1));
    assert!(scrape(addr).contains("parapet_bans_total 0"));
    drop(idle);
}

#[test]
fn a_remote_address_is_refused_unless_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let remote = MetricsConfig {
        listen: Some("0.0.0.0:0".parse().unwrap()),
        ..MetricsConfig::default()
    };
    let e = start(dir.path(), remote.clone()).err().expect("refused");
    assert!(e.to_string().contains("--metrics-allow-remote"), "{e}");
    assert!(!dir.path().join("s.sock").exists(), "socket created anyway");
    let d = start(
        dir.path(),
        MetricsConfig {
            allow_remote: true,
            ..remote
        },
    )
    .unwrap();
    assert!(d.metrics_addr.unwrap().ip().is_unspecified());
    // No listener unless asked for.
    drop(d);
    let d = start(dir.path(), MetricsConfig::default()).unwrap();
    assert!(d.metrics_addr.is_none());
}
