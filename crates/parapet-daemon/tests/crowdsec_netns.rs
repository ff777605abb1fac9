//! A `cscli` ban is enforced in the kernel: a real CrowdSec Local API and a
//! real `parapetd --crowdsec` run inside a network namespace the test
//! creates, with the dataplane attached (XDP) to its veth; UDP frames from
//! the peer namespace drop once `cscli decisions add --ip PEER` is made and
//! pass again after `cscli decisions delete`. Needs root.

mod common;
mod crowdsec_support;

use common::{ok, Proc, BAN4_RULES, PEER};
use crowdsec_support::Lapi;
use parapet_daemon::Client;
use parapet_testbed::{require_root, Pair, Veth};
use serde_json::json;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Sends datagrams from the peer until `want` (delivered or not) holds for
/// one, bounded; the time it took.
fn until_delivery(pair: &Pair, want: bool, what: &str) -> Duration {
    let rx = pair.a.run_in(|| {
        let s = UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::new(10, 250, 0, 1), 9999)).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(30))).unwrap();
        s
    });
    let tx = pair.b.run_in(|| {
        let s = UdpSocket::bind(SocketAddrV4::new(PEER.parse().unwrap(), 0)).unwrap();
        s.connect("10.250.0.1:9999").unwrap();
        s
    });
    let t0 = Instant::now();
    for seq in 0u32.. {
        assert!(t0.elapsed() < Duration::from_secs(20), "timed out: {what}");
        tx.send(&seq.to_be_bytes()).unwrap();
        let mut b = [0u8; 8];
        let mut got = false;
        while let Ok(n) = rx.recv(&mut b) {
            got |= n == 4 && b[..4] == seq.to_be_bytes();
        }
        if got == want {
            break;
        }
    }
    t0.elapsed()
}

#[test]
#[ignore = "needs root"]
fn a_cscli_ban_drops_frames_at_an_attached_veth() {
    require_root();
    parapet_testbed::remove_stale("crowdsec");
    let dir = tempfile::tempdir().unwrap();
    let pair = Pair::create("crowdsec", &Veth::default()).unwrap();
    let lapi = Lapi::start(dir.path(), Some(&pair.a));
    let key = lapi.bouncer_key("parapet");
    let sock = dir.path().join("parapet.sock");
    let log = dir.path().join("parapetd.log");
    let child = pair
        .a
        .command(env!("CARGO_BIN_EXE_parapetd"))
        .arg("--socket")
        .arg(&sock)
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .args(["--crowdsec", &lapi.url(), "--crowdsec-key-file"])
        .arg(&key)
        .args(["--crowdsec-interval", "1"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let _d = Proc(child);
    let t0 = Instant::now();
    let mut c = loop {
        if let Ok(mut c) = Client::connect(&sock) {
            if c.call(json!({"cmd": "ping"})).is_ok() {
                break c;
            }
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "parapetd not ready");
        std::thread::sleep(Duration::from_millis(20));
    };
    // The ban set exists before the ruleset that references it.
    ok(
        &mut c,
        json!({"cmd": "ban", "elems": ["10.99.99.99"], "timeout": 600}),
    );
    ok(
        &mut c,
        json!({"cmd": "apply", "rules": BAN4_RULES, "name": "crowdsec.rules"}),
    );
    ok(
        &mut c,
        json!({"cmd": "attach", "iface": "pp-a", "hook": "xdp", "mode": "native"}),
    );
    until_delivery(&pair, true, "peer traffic passes before the ban");
    let t = Instant::now();
    lapi.cscli(&["decisions", "add", "--ip", PEER, "--duration", "1h"]);
    let cli = t.elapsed();
    let dropped = until_delivery(&pair, false, "frames from the banned peer drop");
    eprintln!("cscli took {cli:?}; first dropped frame {dropped:?} after it (poll interval 1 s)");
    lapi.cscli(&["decisions", "delete", "--ip", PEER]);
    until_delivery(
        &pair,
        true,
        "frames pass again after cscli decisions delete",
    );
    let log = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(!log.contains("crowdsec:"), "crowdsec errors: {log}");
}
