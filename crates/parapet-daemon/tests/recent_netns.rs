//! xt_recent tables through parapetd, as `/proc/net/xt_recent/NAME`: the
//! daemon runs in a network namespace this test creates with its dataplane
//! on a veth (XDP); `recent NAME +ADDR` makes `-m recent --rcheck` drop
//! the peer's datagrams, the listing shows the address, `-ADDR` and `/`
//! let them through again. And the SSH brute-force pair on live traffic:
//! the fourth datagram within the minute is dropped, on the kernel's own
//! clock.

mod common;

use common::Daemon;
use parapet_daemon::Client;
use parapet_testbed::{require_root, Pair, Veth};
use serde_json::{json, Value};
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::time::Duration;

const PEER: &str = "10.250.0.2";
const RULES: &str = "*filter
:INPUT ACCEPT [0:0]
-A INPUT -p udp -m udp --dport 9999 -m recent --rcheck --name BAN -j DROP
-A INPUT -p udp -m udp --dport 9998 -m recent --set --name SSH
-A INPUT -p udp -m udp --dport 9998 -m recent --update --seconds 60 --hitcount 4 --name SSH -j DROP
COMMIT
";

fn ok(c: &mut Client, v: Value) -> Value {
    let r = c.call(v.clone()).unwrap_or_else(|e| panic!("{v}: {e}"));
    assert!(r.ok(), "{v}: {:?}", r.error());
    Value::Object(r.body)
}

/// Does one datagram from the peer to `port` arrive?
fn delivered(pair: &Pair, port: u16, seq: u32) -> bool {
    let rx = pair.a.run_in(|| {
        let s = UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::new(10, 250, 0, 1), port)).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(150)))
            .unwrap();
        s
    });
    let tx = pair.b.run_in(|| {
        let s = UdpSocket::bind(SocketAddrV4::new(PEER.parse().unwrap(), 0)).unwrap();
        s.connect(("10.250.0.1", port)).unwrap();
        s
    });
    tx.send(&seq.to_be_bytes()).unwrap();
    let mut b = [0u8; 8];
    // Bounded: the socket's timeout.
    matches!(rx.recv(&mut b), Ok(4) if b[..4] == seq.to_be_bytes())
}

fn listed(c: &mut Client) -> Vec<String> {
    let r = ok(c, json!({"cmd": "recent", "set": "BAN"}));
    r["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["src"].as_str().unwrap().to_string())
        .collect()
}

#[test]
#[ignore = "needs root"]
fn recent_tables_through_parapetd() {
    require_root();
    parapet_testbed::remove_stale("recentd");
    let dir = tempfile::tempdir().unwrap();
    let pair = Pair::create("recentd", &Veth::default()).unwrap();
    let d = Daemon::start_in(&pair.a, dir.path(), &[]);
    let mut c = d.client();
    ok(
        &mut c,
        json!({"cmd": "apply", "rules": RULES, "name": "recent.rules"}),
    );
    ok(
        &mut c,
        json!({"cmd": "attach", "iface": "pp-a", "hook": "xdp", "mode": "native"}),
    );
    // Bad writes are refused, the daemon stays up.
    for bad in ["*1.2.3.4", "+not-an-address", "+"] {
        let r = c.call(json!({"cmd": "recent", "set": "BAN", "elems": [bad]}));
        assert!(r.is_err(), "{bad} must be refused");
    }
    assert!(delivered(&pair, 9999, 1), "not in BAN: passes");
    assert!(listed(&mut c).is_empty());

    let r = ok(
        &mut c,
        json!({"cmd": "recent", "set": "BAN", "elems": [format!("+{PEER}")]}),
    );
    assert_eq!(r["added"], 1);
    assert_eq!(listed(&mut c), [PEER]);
    assert!(!delivered(&pair, 9999, 2), "+ADDR: dropped");
    ok(
        &mut c,
        json!({"cmd": "recent", "set": "BAN", "elems": [format!("-{PEER}")]}),
    );
    assert!(listed(&mut c).is_empty());
    assert!(delivered(&pair, 9999, 3), "-ADDR: passes again");
    ok(
        &mut c,
        json!({"cmd": "recent", "set": "BAN", "elems": [format!("+{PEER}")]}),
    );
    assert!(!delivered(&pair, 9999, 4), "+ADDR again: dropped");
    let r = ok(
        &mut c,
        json!({"cmd": "recent", "set": "BAN", "elems": ["/"]}),
    );
    assert_eq!(r["flushed"], 1);
    assert!(delivered(&pair, 9999, 5), "/: passes again");

    // The SSH pair on live traffic: attempts 4.. within the minute drop.
    let fates: Vec<bool> = (0..6).map(|i| delivered(&pair, 9998, 10 + i)).collect();
    assert_eq!(fates, [true, true, true, false, false, false]);
    let r = ok(&mut c, json!({"cmd": "recent", "set": "SSH"}));
    assert_eq!(r["entries"][0]["src"], PEER);
    // --set on each of 6, --update matched on 3 of them: 9 stamps.
    assert_eq!(r["entries"][0]["stamps"].as_array().unwrap().len(), 9);
}
