//! End to end over a veth pair between two fresh namespaces
//! (`common::netns`), with real sockets:
//!
//! - REJECT: a TCP connect to a port rejected with `tcp-reset` fails at
//!   once with ECONNREFUSED, and a connected UDP socket sending to a port
//!   rejected with the default type gets ECONNREFUSED from the ICMP port
//!   unreachable, at tc, XDP native and XDP skb;
//! - conntrack: the namespace running parapet (policy DROP, only
//!   `--ctstate ESTABLISHED,RELATED` accepted) opens a TCP connection and
//!   sends UDP to its peer and gets the replies, while connections and
//!   datagrams the peer starts are dropped.
//!
//! Needs root (`#[ignore = "needs root"]`).

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::process::Command;
use std::time::{Duration, Instant};

use common::netns::{Netns, RX_ADDR, TX_ADDR};
use common::{iptables_image, load_dataplane};
use parapet_dataplane::{AttachPoint, Dataplane, Features, LoadOptions, Mode, SetSizing, Stat};

const REJECTED: u16 = 7;

fn setup(test: &str, tag: &str, conntrack: bool) -> (Dataplane, Netns) {
    drop(load_dataplane(test, &LoadOptions::default()));
    let dp = Dataplane::load_with(
        &LoadOptions::default(),
        &SetSizing::default(),
        &Features {
            conntrack,
            ..Features::default()
        },
    )
    .expect("load");
    assert!(
        !conntrack || dp.conntrack(),
        "{test}: {}",
        dp.conntrack_note().unwrap_or("no conntrack")
    );
    let ns = Netns::create(tag).expect("the veth/netns topology");
    (dp, ns)
}

fn reject_scenario(hook: AttachPoint, mode: Mode, tag: &str) {
    let test = format!("e2e_reject_{tag}");
    let (mut dp, ns) = setup(&test, tag, false);
    let text = format!(
        "*filter\n:INPUT ACCEPT [0:0]\n\
         -A INPUT -p tcp --dport {REJECTED} -j REJECT --reject-with tcp-reset\n\
         -A INPUT -p udp --dport {REJECTED} -j REJECT\n\
         COMMIT\n"
    );
    dp.write_image(&iptables_image(&text)).unwrap();
    dp.swap().unwrap();
    // XDP_TX on a veth end reaches its peer only when the peer runs NAPI:
    // an XDP program there (here: another parapet that passes everything)
    let _peer = if hook == AttachPoint::Xdp && mode == Mode::Native {
        let mut p = Dataplane::load(&LoadOptions::default()).expect("peer load");
        Netns::run_in(&ns.tx, || {
            p.attach("ppv-tx", AttachPoint::Xdp, Mode::Native)
        })
        .expect("peer attach");
        Some(p)
    } else {
        None
    };
    let a = Netns::run_in(&ns.rx, || dp.attach("ppv-rx", hook, mode)).expect("attach");
    println!(
        "{test}: attached {:?} mode {:?} note {:?}",
        a.hook, a.mode, a.note
    );

    // TCP: refused at once, not after a timeout
    let to = SocketAddr::from((RX_ADDR, REJECTED));
    let (tcp, took) = Netns::run_in(&ns.tx, || {
        let t0 = Instant::now();
        let r = TcpStream::connect_timeout(&to, Duration::from_secs(5));
        (r.map(|_| ()), t0.elapsed())
    });
    let err = tcp.expect_err("connect to a rejected port succeeded");
    assert_eq!(err.kind(), ErrorKind::ConnectionRefused, "{test}: {err}");
    assert!(
        took < Duration::from_secs(2),
        "{test}: refused only after {took:?}"
    );

    // UDP: the ICMP port unreachable makes the connected socket's next
    // receive fail with ECONNREFUSED
    let udp = Netns::run_in(&ns.tx, || {
        let s = UdpSocket::bind((TX_ADDR, 0)).unwrap();
        s.connect(to).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        s.send(b"anyone?").unwrap();
        let mut buf = [0u8; 64];
        s.recv(&mut buf).map(|_| ())
    });
    let err = udp.expect_err("a datagram came back from a rejected port");
    assert_eq!(err.kind(), ErrorKind::ConnectionRefused, "{test}: {err}");

    let st = dp.stats().unwrap();
    assert!(st.get(Stat::RejectSent) >= 2, "{test}: {st:?}");
    dp.detach(a.id).unwrap();
    drop(ns);
}

#[test]
#[ignore = "needs root"]
fn e2e_reject_tc() {
    reject_scenario(AttachPoint::Tc, Mode::Native, "rtc");
}

#[test]
#[ignore = "needs root"]
fn e2e_reject_xdp_native() {
    reject_scenario(AttachPoint::Xdp, Mode::Native, "rxn");
}

#[test]
#[ignore = "needs root"]
fn e2e_reject_xdp_skb() {
    reject_scenario(AttachPoint::Xdp, Mode::Skb, "rxs");
}

/// Conntrack runs in a namespace only while some netfilter rule there
/// needs it (nf_ct_netns_get): an nft rule that reads `ct state` and
/// accepts everything turns it on in the namespace running parapet.
fn enable_conntrack(ns: &Netns) -> Result<(), String> {
    use std::process::Stdio;
    let rules = "table inet ppct {\n chain out {\n  type filter hook output priority 0;\n  \
                 ct state invalid counter accept\n }\n}\n";
    let mut child = Command::new("ip")
        .args(["netns", "exec", &ns.rx, "nft", "-f", "-"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("nft: {e}"))?;
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(rules.as_bytes())
        .map_err(|e| format!("nft stdin: {e}"))?;
    let out = child.wait_with_output().map_err(|e| format!("nft: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "nft: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn conntrack_scenario(hook: AttachPoint, mode: Mode, tag: &str) {
    let test = format!("e2e_conntrack_{tag}");
    let (mut dp, ns) = setup(&test, tag, true);
    if let Err(e) = enable_conntrack(&ns) {
        panic!("{test}: cannot turn conntrack on: {e}");
    }
    // Rule 2 lets the peer open connections to port 5004 with a SYN;
    // everything after it on that connection must be ESTABLISHED: sent in
    // the original direction, so only the SEEN_REPLY bit of ct->status
    // (the CO-RE-relocated read) tells.
    let text = "*filter\n:INPUT DROP [0:0]\n\
        -A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT\n\
        -A INPUT -p tcp --dport 5004 --syn -m conntrack --ctstate NEW -j ACCEPT\n\
        COMMIT\n";
    dp.write_image(&iptables_image(text)).unwrap();
    dp.swap().unwrap();
    let a = Netns::run_in(&ns.rx, || dp.attach("ppv-rx", hook, mode)).expect("attach");
    println!(
        "{test}: attached {:?} mode {:?} note {:?}",
        a.hook, a.mode, a.note
    );

    // The peer: a TCP echo server and a UDP echo socket.
    let (listener, echo) = Netns::run_in(&ns.tx, || {
        (
            TcpListener::bind((TX_ADDR, 5000)).unwrap(),
            UdpSocket::bind((TX_ADDR, 5001)).unwrap(),
        )
    });
    echo.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let server = std::thread::spawn(move || {
        let (mut c, _) = listener.accept().expect("accept");
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut buf = [0u8; 4];
        c.read_exact(&mut buf).expect("server read");
        c.write_all(b"pong").expect("server write");
        let (n, from) = echo.recv_from(&mut [0u8; 64]).expect("udp echo recv");
        echo.send_to(&b"udp-pong"[..n.min(8)], from)
            .expect("udp echo send");
    });

    // Our own connections: the replies are ESTABLISHED and get through.
    let reply = Netns::run_in(&ns.rx, || {
        let mut c = TcpStream::connect_timeout(&(TX_ADDR, 5000).into(), Duration::from_secs(5))?;
        c.set_read_timeout(Some(Duration::from_secs(5)))?;
        c.write_all(b"ping")?;
        let mut buf = [0u8; 4];
        c.read_exact(&mut buf)?;
        let u = UdpSocket::bind((RX_ADDR, 0))?;
        u.set_read_timeout(Some(Duration::from_secs(5)))?;
        u.send_to(b"udp-ping", (TX_ADDR, 5001))?;
        let mut ubuf = [0u8; 64];
        let n = u.recv(&mut ubuf)?;
        Ok::<_, std::io::Error>((buf, ubuf[..n].to_vec()))
    });
    let (tcp_reply, udp_reply) = reply.expect("our connections get their replies");
    assert_eq!(&tcp_reply, b"pong");
    assert_eq!(udp_reply, b"udp-pong");
    server.join().expect("server thread");

    // The peer's ICMP port unreachable for our datagram to a closed port
    // quotes our flow: RELATED, accepted, and the connected socket sees it.
    let related = Netns::run_in(&ns.rx, || {
        let u = UdpSocket::bind((RX_ADDR, 0)).unwrap();
        u.connect((TX_ADDR, 5999)).unwrap();
        u.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        u.send(b"closed?").unwrap();
        u.recv(&mut [0u8; 64]).map(|_| ())
    });
    let err = related.expect_err("a reply from a closed port");
    assert_eq!(
        err.kind(),
        ErrorKind::ConnectionRefused,
        "{test}: ICMP error not RELATED: {err}"
    );

    // The peer's own attempts are NEW and dropped.
    let (_l, u_in) = Netns::run_in(&ns.rx, || {
        let l = TcpListener::bind((RX_ADDR, 5002)).unwrap();
        let u = UdpSocket::bind((RX_ADDR, 5003)).unwrap();
        u.set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        (l, u)
    });
    let unsolicited = Netns::run_in(&ns.tx, || {
        let r = TcpStream::connect_timeout(&(RX_ADDR, 5002).into(), Duration::from_millis(800));
        let u = UdpSocket::bind((TX_ADDR, 0)).unwrap();
        for _ in 0..3 {
            u.send_to(b"hello?", (RX_ADDR, 5003)).unwrap();
        }
        r.map(|_| ())
    });
    let err = unsolicited.expect_err("the peer's connection got through");
    assert_eq!(err.kind(), ErrorKind::TimedOut, "{test}: {err}");
    assert!(
        u_in.recv(&mut [0u8; 64]).is_err(),
        "{test}: an unsolicited datagram got through"
    );

    // The peer's connection to the open port: SYN is NEW, the rest of
    // its packets ESTABLISHED.
    let open = Netns::run_in(&ns.rx, || TcpListener::bind((RX_ADDR, 5004)).unwrap());
    let server = std::thread::spawn(move || {
        let (mut c, _) = open.accept().expect("accept 5004");
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut buf = [0u8; 5];
        c.read_exact(&mut buf).expect("data from the peer");
        c.write_all(&buf).expect("echo");
        buf
    });
    let echoed = Netns::run_in(&ns.tx, || {
        let mut c = TcpStream::connect_timeout(&(RX_ADDR, 5004).into(), Duration::from_secs(5))?;
        c.set_read_timeout(Some(Duration::from_secs(5)))?;
        c.write_all(b"hello")?;
        let mut buf = [0u8; 5];
        c.read_exact(&mut buf)?;
        Ok::<_, std::io::Error>(buf)
    });
    assert_eq!(
        &echoed.expect("the peer's allowed connection works"),
        b"hello"
    );
    assert_eq!(&server.join().expect("server 5004"), b"hello");
    assert!(dp.counter(2).unwrap().packets >= 1, "the NEW SYN rule");

    let st = dp.stats().unwrap();
    assert!(st.get(Stat::CtFound) >= 3, "{test}: {st:?}");
    assert!(dp.counter(1).unwrap().packets >= 3, "ESTABLISHED rule");
    assert!(dp.counter(0).unwrap().packets >= 2, "policy drops");
    dp.detach(a.id).unwrap();
    drop(ns);
}

#[test]
#[ignore = "needs root"]
fn e2e_conntrack_tc() {
    conntrack_scenario(AttachPoint::Tc, Mode::Native, "ctc");
}

#[test]
#[ignore = "needs root"]
fn e2e_conntrack_xdp_native() {
    conntrack_scenario(AttachPoint::Xdp, Mode::Native, "cxn");
}

#[test]
#[ignore = "needs root"]
fn e2e_conntrack_xdp_skb() {
    conntrack_scenario(AttachPoint::Xdp, Mode::Skb, "cxs");
}
