//! REJECT at the netfilter INPUT and OUTPUT hooks, answered from user space
//! (`src/reject_queue.rs`), against the kernel's own REJECT: two veth
//! namespace pairs, one filtered by parapet's netfilter program, its twin by
//! iptables-legacy / ip6tables-legacy with the same rules. A TCP connect to
//! the port rejected with `tcp-reset` and a connected UDP socket sending to
//! the port rejected with the default type (port unreachable) must end the
//! same way in both, for IPv4 and IPv6: at INPUT ECONNREFUSED at once; at
//! OUTPUT (the filtered namespace sends) the reset refuses the connect and
//! the datagram's send fails with EPERM. Listeners on both ports make any
//! other outcome (a connection, a timeout) visible; without the answer the
//! connect times out (INPUT) or fails with EPERM (OUTPUT).
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

/// The rules, in the chain at `hook` (input, output).
fn rules(hook: &str) -> String {
    format!(
        "table inet filter {{\n  chain c {{\n    type filter hook {hook} priority 0; policy accept;\n    \
         tcp dport 81 reject with tcp reset\n    udp dport 82 reject\n  }}\n}}\n"
    )
}

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
    for (name, addr) in [(&ns.rx, RX6), (&ns.tx, TX6)] {
        parapet_testbed::wait_local_route(name, &addr.to_string()).unwrap();
    }
}

/// Listeners on both ports where the probes go: without a REJECT, the
/// connect succeeds and the datagram meets silence. INPUT: the filtered
/// namespace (rx) receives; OUTPUT: it sends, to its peer (tx).
fn listeners(ns: &Netns, output: bool) -> (TcpListener, UdpSocket, TcpListener, UdpSocket) {
    let (name, v4, v6) = if output {
        (&ns.tx, TX_ADDR, TX6)
    } else {
        (&ns.rx, RX_ADDR, RX6)
    };
    Netns::run_in(name, || {
        (
            TcpListener::bind((v4, 81)).unwrap(),
            UdpSocket::bind((v4, 82)).unwrap(),
            TcpListener::bind((v6, 81)).unwrap(),
            UdpSocket::bind((v6, 82)).unwrap(),
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
    // a packet dropped at OUTPUT fails the send itself (EPERM)
    if let Err(e) = s.send(b"anyone?") {
        return Outcome::Other(format!("send: {:?}", e.kind()));
    }
    let t0 = Instant::now();
    let r = s.recv(&mut [0u8; 64]);
    outcome("udp", to, t0, r, "a reply")
}

/// Outcomes of the four probes toward the listeners.
fn probes(ns: &Netns, output: bool) -> Vec<Outcome> {
    let (name, from4, to4, from6, to6) = if output {
        (&ns.rx, RX_ADDR, TX_ADDR, RX6, TX6)
    } else {
        (&ns.tx, TX_ADDR, RX_ADDR, TX6, RX6)
    };
    Netns::run_in(name, || {
        vec![
            tcp_probe(SocketAddr::from((to4, 81))),
            udp_probe(from4.into(), SocketAddr::from((to4, 82))),
            tcp_probe(SocketAddr::from((to6, 81))),
            udp_probe(from6.into(), SocketAddr::from((to6, 82))),
        ]
    })
}

fn kernel_twin(output: bool) -> Vec<Outcome> {
    let ns = Netns::create("nfrk").expect("twin topology");
    add_v6(&ns);
    let _l = listeners(&ns, output);
    let chain = if output { "OUTPUT" } else { "INPUT" };
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
            let mut argv = vec!["netns", "exec", &ns.rx, ipt, "-A", chain];
            argv.extend_from_slice(rule);
            parapet_testbed::run("ip", &argv).expect("kernel REJECT rule");
        }
    }
    probes(&ns, output)
}

#[test]
#[ignore = "needs root"]
fn input_reject_answers_like_the_kernel() {
    reject_answers_like_the_kernel("input_reject_answers_like_the_kernel", NfHook::Input);
}

#[test]
#[ignore = "needs root"]
fn output_reject_answers_the_local_sender_like_the_kernel() {
    reject_answers_like_the_kernel(
        "output_reject_answers_the_local_sender_like_the_kernel",
        NfHook::Output,
    );
}

fn reject_answers_like_the_kernel(test: &str, hook: NfHook) {
    let output = hook == NfHook::Output;
    let want = kernel_twin(output);
    // INPUT: refused at once; OUTPUT: the reset refuses the connect, the
    // datagram's send fails (EPERM: dropped at OUTPUT)
    let eperm = || Outcome::Other("send: PermissionDenied".into());
    let expect = if output {
        vec![Outcome::Refused, eperm(), Outcome::Refused, eperm()]
    } else {
        vec![Outcome::Refused; 4]
    };
    assert_eq!(want, expect, "{test}: the kernel's own REJECT");

    let mut dp = load_dataplane(test, &LoadOptions::default());
    assert_eq!(dp.netfilter_note(), None, "netfilter program");
    let text = rules(if output { "output" } else { "input" });
    let rs = parapet_parse::parse(&text, "test", parapet_parse::Format::Auto)
        .expect("test ruleset parses")
        .ruleset;
    let list = parapet_model::flatten(&rs, rs.select_chain(Some("filter/c")).unwrap()).unwrap();
    let (image, _) =
        parapet_compile::compile(&list, &parapet_compile::CompileOptions::default()).unwrap();
    dp.write_hook_image(hook, &image.to_bytes()).unwrap();
    dp.swap().unwrap();

    let ns = Netns::create("nfrp").expect("topology");
    add_v6(&ns);
    let _l = listeners(&ns, output);
    let mut queue = dp.take_reject_queue().expect("the reject ring");
    assert!(dp.take_reject_queue().is_none(), "taken once");
    let sender = Netns::run_in(&ns.rx, RejectSender::new).expect("raw sockets");
    let ids = Netns::run_in(&ns.rx, || {
        NfFamily::ALL.map(|f| dp.attach_netfilter(hook, f, 0).unwrap().id)
    });
    let stop = Arc::new(AtomicBool::new(false));
    let counts = Arc::new(RejectCounts::default());
    let server = {
        let (stop, counts) = (stop.clone(), counts.clone());
        std::thread::spawn(move || {
            queue.serve(&sender, &stop, Duration::from_millis(50), &counts);
        })
    };
    let got = probes(&ns, output);
    stop.store(true, Ordering::Relaxed);
    server.join().unwrap();
    for id in ids {
        dp.detach(id).unwrap();
    }
    assert_eq!(got, want, "{test}: parapet at {hook} vs the kernel");
    let st = dp.stats().unwrap();
    assert_eq!(st.get(Stat::NfRejectQueued), 4, "{st:?}");
    assert_eq!(st.get(Stat::NfRejectRingFull), 0);
    assert_eq!(counts.sent.load(Ordering::Relaxed), 4, "{counts:?}");
    assert_eq!(counts.failed.load(Ordering::Relaxed), 0, "{counts:?}");
}
