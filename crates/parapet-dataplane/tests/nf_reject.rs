//! REJECT at the netfilter INPUT hook, answered from user space
//! (`src/reject_queue.rs`), against the kernel's own REJECT: two veth
//! namespace pairs, one filtered by parapet's netfilter program, its twin by
//! iptables-legacy / ip6tables-legacy with the same rules. A TCP connect to
//! the port rejected with `tcp-reset` and a connected UDP socket sending to
//! the port rejected with the default type (port unreachable) must end the
//! same way in both, for IPv4 and IPv6: ECONNREFUSED, at once. Listeners
//! on both ports make any other outcome (a connection, a timeout) visible.
//!
//! Needs root (`#[ignore = "needs root"]`).

mod common;

use std::io::ErrorKind;
use std::net::{IpAddr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::load_dataplane;
use common::netns::{Netns, RX_ADDR, TX_ADDR};
use parapet_dataplane::{LoadOptions, NfFamily, NfHook, RejectCounts, RejectSender, Stat};

const RX6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x250, 0, 0, 0, 0, 0, 1);
const TX6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x250, 0, 0, 0, 0, 0, 2);

const RULES: &str = "table inet filter {
  chain input {
    type filter hook input priority 0; policy accept;
    tcp dport 81 reject with tcp reset
    udp dport 82 reject
  }
}
";

fn add_v6(ns: &Netns) {
    for (name, dev, addr) in [(&ns.rx, "ppv-rx", RX6), (&ns.tx, "ppv-tx", TX6)] {
        parapet_testbed::ip(&[
            "-n",
            name,
            "-6",
            "addr",
            "add",
            &format!("{addr}/64"),
            "dev",
            dev,
            "nodad",
        ])
        .expect("IPv6 address");
    }
}

/// Listeners on both ports in the receiving namespace: without a REJECT,
/// the connect succeeds and the datagram meets silence.
fn listeners(ns: &Netns) -> (TcpListener, UdpSocket, TcpListener, UdpSocket) {
    Netns::run_in(&ns.rx, || {
        (
            TcpListener::bind((RX_ADDR, 81)).unwrap(),
            UdpSocket::bind((RX_ADDR, 82)).unwrap(),
            TcpListener::bind((RX6, 81)).unwrap(),
            UdpSocket::bind((RX6, 82)).unwrap(),
        )
    })
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Outcome {
    /// ECONNREFUSED within a second.
    Refused,
    Other(String),
}

/// How a probe that waited since `t0` for an answer ended: `ok` names a
/// success.
fn outcome<T>(what: &str, to: SocketAddr, t0: Instant, r: std::io::Result<T>, ok: &str) -> Outcome {
    let took = t0.elapsed();
    println!("{what} {to}: answered after {took:?}");
    match r {
        Err(e) if e.kind() == ErrorKind::ConnectionRefused && took < Duration::from_secs(1) => {
            Outcome::Refused
        }
        Err(e) => Outcome::Other(format!("{e} after {took:?}")),
        Ok(_) => Outcome::Other(ok.into()),
    }
}

fn tcp_probe(to: SocketAddr) -> Outcome {
    let t0 = Instant::now();
    let r = TcpStream::connect_timeout(&to, Duration::from_secs(3));
    outcome("tcp", to, t0, r, "connected")
}

fn udp_probe(from: IpAddr, to: SocketAddr) -> Outcome {
    let s = UdpSocket::bind((from, 0)).unwrap();
    s.connect(to).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    s.send(b"anyone?").unwrap();
    let t0 = Instant::now();
    let r = s.recv(&mut [0u8; 64]);
    outcome("udp", to, t0, r, "a reply")
}

/// Outcomes of the four probes from the sending namespace.
fn probes(ns: &Netns) -> Vec<Outcome> {
    Netns::run_in(&ns.tx, || {
        vec![
            tcp_probe(SocketAddr::from((RX_ADDR, 81))),
            udp_probe(TX_ADDR.into(), SocketAddr::from((RX_ADDR, 82))),
            tcp_probe(SocketAddr::from((RX6, 81))),
            udp_probe(TX6.into(), SocketAddr::from((RX6, 82))),
        ]
    })
}

fn kernel_twin() -> Vec<Outcome> {
    let ns = Netns::create("nfrk").expect("twin topology");
    add_v6(&ns);
    let _l = listeners(&ns);
    for ipt in ["iptables-legacy", "ip6tables-legacy"] {
        for rule in [
            &[
                "-p",
                "tcp",
                "--dport",
                "81",
                "-j",
                "REJECT",
                "--reject-with",
                "tcp-reset",
            ][..],
            &["-p", "udp", "--dport", "82", "-j", "REJECT"][..],
        ] {
            let mut argv = vec!["netns", "exec", &ns.rx, ipt, "-A", "INPUT"];
            argv.extend_from_slice(rule);
            parapet_testbed::run("ip", &argv).expect("kernel REJECT rule");
        }
    }
    probes(&ns)
}

#[test]
#[ignore = "needs root"]
fn input_reject_answers_like_the_kernel() {
    let want = kernel_twin();
    assert_eq!(want, vec![Outcome::Refused; 4], "the kernel's own REJECT");

    let mut dp = load_dataplane(
        "input_reject_answers_like_the_kernel",
        &LoadOptions::default(),
    );
    assert_eq!(dp.netfilter_note(), None, "netfilter program");
    let rs = parapet_parse::parse(RULES, "test", parapet_parse::Format::Auto)
        .expect("test ruleset parses")
        .ruleset;
    let list = parapet_model::flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
    let (image, _) =
        parapet_compile::compile(&list, &parapet_compile::CompileOptions::default()).unwrap();
    dp.write_hook_image(NfHook::Input, &image.to_bytes())
        .unwrap();
    dp.swap().unwrap();

    let ns = Netns::create("nfrp").expect("topology");
    add_v6(&ns);
    let _l = listeners(&ns);
    let mut queue = dp.take_reject_queue().expect("the reject ring");
    assert!(dp.take_reject_queue().is_none(), "taken once");
    let sender = Netns::run_in(&ns.rx, RejectSender::new).expect("raw sockets");
    let ids = Netns::run_in(&ns.rx, || {
        NfFamily::ALL.map(|f| dp.attach_netfilter(NfHook::Input, f, 0).unwrap().id)
    });
    let stop = Arc::new(AtomicBool::new(false));
    let counts = Arc::new(RejectCounts::default());
    let server = {
        let (stop, counts) = (stop.clone(), counts.clone());
        std::thread::spawn(move || {
            queue.serve(&sender, &stop, Duration::from_millis(50), &counts);
        })
    };
    let got = probes(&ns);
    stop.store(true, Ordering::Relaxed);
    server.join().unwrap();
    for id in ids {
        dp.detach(id).unwrap();
    }
    assert_eq!(got, want, "parapet at INPUT vs the kernel");
    let st = dp.stats().unwrap();
    assert_eq!(st.get(Stat::NfRejectQueued), 4, "{st:?}");
    assert_eq!(st.get(Stat::NfRejectRingFull), 0);
    assert_eq!(counts.sent.load(Ordering::Relaxed), 4, "{counts:?}");
    assert_eq!(counts.failed.load(Ordering::Relaxed), 0, "{counts:?}");
}
