//! A ban made on one node is enforced in the kernel of every other node.
//! Three real `parapetd`, each in its own network namespace with its
//! dataplane attached (XDP, native) to its own veth, whose peer namespace
//! sends UDP frames over it; a real `nats-server` with JetStream in a hub
//! namespace that each node reaches over a second veth. A ban on node 0
//! must make the frames sent over nodes 1's and 2's veths drop; the time
//! from the ban's acknowledgement to the first dropped frame is printed.
//! Needs root (`#[ignore = "needs root"]`).

mod common;

use common::{ok, Proc, BAN4_RULES, PEER};
use parapet_daemon::Client;
use parapet_testbed::{ip, require_root, Netns, Pair, Veth};
use serde_json::json;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

const NODES: usize = 3;
const PORT: u16 = 4222;
const UDP: u16 = 9999;

fn spawn(ns: &Netns, prog: &str, args: &[&str], log: &Path) -> Proc {
    let c = ns
        .command(prog)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("{prog}: {e}"));
    Proc(c)
}

fn wait_socket(sock: &Path, log: &Path) -> Client {
    let t0 = Instant::now();
    loop {
        if let Ok(mut c) = Client::connect(sock) {
            if c.call(json!({"cmd": "ping"})).is_ok() {
                return c;
            }
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "parapetd not ready: {}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A frame from the peer over the node's veth: delivered or dropped.
struct Probe {
    tx: UdpSocket,
    rx: UdpSocket,
    seq: u32,
}

impl Probe {
    fn new(pair: &Pair) -> Probe {
        let rx = pair.a.run_in(|| {
            let s = UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::new(10, 250, 0, 1), UDP)).unwrap();
            s.set_read_timeout(Some(Duration::from_millis(30))).unwrap();
            s
        });
        let tx = pair.b.run_in(|| {
            let s = UdpSocket::bind(SocketAddrV4::new(PEER.parse().unwrap(), 0)).unwrap();
            s.connect(SocketAddrV4::new(Ipv4Addr::new(10, 250, 0, 1), UDP))
                .unwrap();
            s
        });
        Probe { tx, rx, seq: 0 }
    }

    /// Sends one datagram; true when it arrived.
    fn delivered(&mut self) -> bool {
        self.seq += 1;
        self.tx.send(&self.seq.to_be_bytes()).unwrap();
        let mut b = [0u8; 8];
        while let Ok(n) = self.rx.recv(&mut b) {
            if n == 4 && b[..4] == self.seq.to_be_bytes() {
                return true;
            }
        }
        false
    }
}

#[test]
#[ignore = "needs root"]
fn a_ban_on_one_node_drops_frames_on_every_node() {
    require_root();
    parapet_testbed::remove_stale("fleet");
    let dir = tempfile::tempdir().unwrap();
    let hub = Netns::create("fleet").unwrap();
    let store = dir.path().join("nats");
    let nats_log = dir.path().join("nats.log");
    let store_s = store.to_str().unwrap().to_string();
    let _nats = spawn(
        &hub,
        "nats-server",
        &["-js", "-a", "0.0.0.0", "-p", "4222", "-sd", &store_s],
        &nats_log,
    );
    let mut pairs = Vec::new();
    let mut daemons = Vec::new();
    let mut clients = Vec::new();
    for i in 0..NODES {
        let pair = Pair::create("fleet", &Veth::default()).unwrap();
        // The node's link to the broker's namespace.
        let (n_dev, h_dev) = (format!("fn{i}"), format!("fh{i}"));
        ip(&[
            "link",
            "add",
            &n_dev,
            "netns",
            pair.a.name(),
            "type",
            "veth",
            "peer",
            "name",
            &h_dev,
            "netns",
            hub.name(),
        ])
        .unwrap();
        pair.a
            .ip(&["addr", "add", &format!("10.251.{i}.1/30"), "dev", &n_dev])
            .unwrap();
        pair.a.ip(&["link", "set", &n_dev, "up"]).unwrap();
        hub.ip(&["addr", "add", &format!("10.251.{i}.2/30"), "dev", &h_dev])
            .unwrap();
        hub.ip(&["link", "set", &h_dev, "up"]).unwrap();
        let nd: PathBuf = dir.path().join(format!("n{i}"));
        std::fs::create_dir_all(&nd).unwrap();
        let sock = nd.join("parapet.sock");
        let log = nd.join("parapetd.log");
        let url = format!("nats://10.251.{i}.2:{PORT}");
        let node = format!("n{i}");
        let state = nd.join("state");
        let args = [
            "--socket",
            sock.to_str().unwrap(),
            "--state-dir",
            state.to_str().unwrap(),
            "--fleet",
            &url,
            "--fleet-node",
            &node,
        ];
        daemons.push(spawn(&pair.a, env!("CARGO_BIN_EXE_parapetd"), &args, &log));
        clients.push(wait_socket(&sock, &log));
        pairs.push(pair);
    }
    // Each node: the ban set (through a ban of an unused address, which
    // replicates too), the ruleset that drops its members, the attach.
    for c in clients.iter_mut() {
        ok(
            c,
            json!({"cmd": "ban", "elems": ["10.99.99.99"], "timeout": 600}),
        );
        ok(
            c,
            json!({"cmd": "apply", "rules": BAN4_RULES, "name": "fleet.rules"}),
        );
        ok(
            c,
            json!({"cmd": "attach", "iface": "pp-a", "hook": "xdp", "mode": "native"}),
        );
    }
    let mut probes: Vec<Probe> = pairs.iter().map(Probe::new).collect();
    for (i, p) in probes.iter_mut().enumerate() {
        let t0 = Instant::now();
        while !p.delivered() {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "node {i}: peer traffic never passes"
            );
        }
    }
    // The ban on node 0; frames over nodes 1 and 2 must drop.
    let t0 = Instant::now();
    ok(
        &mut clients[0],
        json!({"cmd": "ban", "elems": [PEER], "timeout": 600}),
    );
    let acked = t0.elapsed();
    // Round-robin over the nodes, one frame each, until each dropped one.
    let mut took: Vec<Option<Duration>> = vec![None; NODES];
    while took.iter().any(Option::is_none) {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the ban on node 0 not enforced within 10 s: {took:?}"
        );
        for (i, p) in probes.iter_mut().enumerate() {
            if took[i].is_none() && !p.delivered() {
                took[i] = Some(t0.elapsed());
            }
        }
    }
    for (i, p) in probes.iter_mut().enumerate() {
        // Dropped, and stays dropped.
        for _ in 0..5 {
            assert!(!p.delivered(), "node {i}: a frame passed after the ban");
        }
    }
    eprintln!("ban acknowledged in {acked:?}; first frame dropped on nodes 0, 1, 2 after {took:?}");
    // The unban on node 2 lets frames through again everywhere.
    ok(&mut clients[2], json!({"cmd": "unban", "elems": [PEER]}));
    for (i, p) in probes.iter_mut().enumerate() {
        let t1 = Instant::now();
        while !p.delivered() {
            assert!(
                t1.elapsed() < Duration::from_secs(10),
                "node {i}: the unban on node 2 not enforced within 10 s"
            );
        }
    }
    drop(daemons);
    drop(pairs);
}
