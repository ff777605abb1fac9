//! A host firewall on the filtered side of a test bed, probed with real
//! connections: policy DROP, replies to the host's own connections
//! accepted by conntrack state, one TCP and one UDP port rejected.

use super::{in_netns, Bed, A_ADDR, B_ADDR};
use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Rejected with a TCP reset.
pub const REJ_TCP: u16 = 7001;
/// Rejected with the default ICMP port unreachable.
pub const REJ_UDP: u16 = 7002;
/// Dropped by the policy (a listener waits there).
pub const DROP_TCP: u16 = 7003;
/// Dropped by the policy (a receiver waits there).
pub const DROP_UDP: u16 = 7004;
/// The peer's TCP echo service.
pub const PEER_TCP: u16 = 7100;
/// The peer's UDP echo service.
pub const PEER_UDP: u16 = 7101;

/// The host ruleset, iptables-save.
pub fn rules() -> String {
    format!(
        "*filter\n:INPUT DROP [0:0]\n\
         -A INPUT -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT\n\
         -A INPUT -p tcp -m tcp --dport {REJ_TCP} -j REJECT --reject-with tcp-reset\n\
         -A INPUT -p udp -m udp --dport {REJ_UDP} -j REJECT\n\
         COMMIT\n"
    )
}

/// `nft list tables` in namespace `ns`.
pub fn nft_tables(ns: &str) -> String {
    let o = Command::new("ip")
        .args(["netns", "exec", ns, "nft", "list", "tables"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout).to_string()
}

/// Stops a `parapet run --background` when dropped.
pub struct StopRun(pub PathBuf);

impl StopRun {
    /// Stops it now; `parapet stop`'s output (the run's log and counters).
    pub fn stop(mut self) -> String {
        let pid = std::mem::take(&mut self.0);
        let o = Command::new(env!("CARGO_BIN_EXE_parapet"))
            .arg("stop")
            .arg(&pid)
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).to_string()
    }
}

impl Drop for StopRun {
    fn drop(&mut self) {
        if !self.0.as_os_str().is_empty() {
            let _ = Command::new(env!("CARGO_BIN_EXE_parapet"))
                .arg("stop")
                .arg(&self.0)
                .output();
        }
    }
}

/// Starts `parapet run RULES --iface IFACE --hook HOOK [--mode native]
/// --background` in namespace `ns` (pidfile in `dir`, named `tag`).
pub fn run_background(
    ns: &str,
    dir: &Path,
    tag: &str,
    rules: &Path,
    iface: &str,
    hook: &str,
) -> Result<StopRun, String> {
    let pid = dir.join(format!("{tag}.pid"));
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns, env!("CARGO_BIN_EXE_parapet"), "run"])
        .arg(rules)
        .args(["--iface", iface, "--hook", hook]);
    if hook == "xdp" {
        c.args(["--mode", "native"]);
    }
    let o = c.arg("--background").arg(&pid).output().unwrap();
    if o.status.success() {
        Ok(StopRun(pid))
    } else {
        Err(String::from_utf8_lossy(&o.stderr).to_string())
    }
}

/// XDP_TX on a veth end reaches its peer only when the peer runs NAPI: an
/// XDP program on the peer's veth (`parapet run`, passing everything)
/// starts it. `None` at tc, where no help is needed.
pub fn xdp_peer(bed: &Bed, dir: &Path, hook: &str) -> Result<Option<StopRun>, String> {
    if hook != "xdp" {
        return Ok(None);
    }
    let accept = dir.join("accept.rules");
    std::fs::write(&accept, "*filter\n:INPUT ACCEPT [0:0]\nCOMMIT\n").unwrap();
    run_background(&bed.a, dir, "peer", &accept, &bed.va, "xdp").map(Some)
}

/// Probes the host firewall of [`rules`] attached at `hook` on `bed.vb`:
/// a TCP connection and a UDP exchange the host opens to the peer get
/// their replies; the peer's connect to [`REJ_TCP`] is refused in under
/// 2 s, its datagram to [`REJ_UDP`] draws a port unreachable; its connect
/// to [`DROP_TCP`] times out and its datagram to [`DROP_UDP`] goes
/// unanswered, with nothing reaching the listeners there. Panics otherwise.
pub fn probe(bed: &Bed, hook: &str) {
    let (peer_tcp, peer_udp) = in_netns(&bed.a, || {
        (
            TcpListener::bind(("0.0.0.0", PEER_TCP)).unwrap(),
            UdpSocket::bind(("0.0.0.0", PEER_UDP)).unwrap(),
        )
    });
    let (host_tcp, host_udp) = in_netns(&bed.b, || {
        let t: Vec<TcpListener> = [REJ_TCP, DROP_TCP]
            .iter()
            .map(|p| TcpListener::bind(("0.0.0.0", *p)).unwrap())
            .collect();
        let u: Vec<UdpSocket> = [REJ_UDP, DROP_UDP]
            .iter()
            .map(|p| {
                let s = UdpSocket::bind(("0.0.0.0", *p)).unwrap();
                s.set_nonblocking(true).unwrap();
                s
            })
            .collect();
        (t, u)
    });
    let echo_tcp = std::thread::spawn(move || {
        let (mut c, _) = peer_tcp.accept().unwrap();
        c.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        let mut buf = [0u8; 4];
        c.read_exact(&mut buf).unwrap();
        c.write_all(b"pong").unwrap();
    });
    let echo_udp = std::thread::spawn(move || {
        peer_udp
            .set_read_timeout(Some(Duration::from_secs(3)))
            .unwrap();
        let mut buf = [0u8; 16];
        let (n, from) = peer_udp.recv_from(&mut buf).unwrap();
        peer_udp.send_to(&buf[..n], from).unwrap();
    });

    // The host's own connections get their replies (ESTABLISHED).
    let peer = Ipv4Addr::from(A_ADDR);
    let (tcp_reply, udp_reply) = in_netns(&bed.b, move || {
        let mut c = TcpStream::connect_timeout(&(peer, PEER_TCP).into(), Duration::from_secs(3))
            .map_err(|e| format!("connect: {e}"))?;
        c.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        c.write_all(b"ping").unwrap();
        let mut buf = [0u8; 4];
        c.read_exact(&mut buf).map_err(|e| format!("read: {e}"))?;
        let u = UdpSocket::bind(("0.0.0.0", 0)).unwrap();
        u.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        u.send_to(b"hello", (peer, PEER_UDP)).unwrap();
        let mut ubuf = [0u8; 16];
        let n = u.recv(&mut ubuf).map_err(|e| format!("udp recv: {e}"))?;
        Ok::<_, String>((buf.to_vec(), ubuf[..n].to_vec()))
    })
    .unwrap_or_else(|e| panic!("{hook}: the host's own connection got no reply: {e}"));
    assert_eq!(tcp_reply, b"pong");
    assert_eq!(udp_reply, b"hello");
    echo_tcp.join().unwrap();
    echo_udp.join().unwrap();

    // The rejected ports answer at once; the others stay silent.
    let host = Ipv4Addr::from(B_ADDR);
    let (rej_tcp, took, rej_udp, drop_tcp, drop_udp) = in_netns(&bed.a, move || {
        let t0 = Instant::now();
        let rej_tcp =
            TcpStream::connect_timeout(&(host, REJ_TCP).into(), Duration::from_secs(3)).map(|_| ());
        let took = t0.elapsed();
        let u = UdpSocket::bind(("0.0.0.0", 0)).unwrap();
        u.connect((host, REJ_UDP)).unwrap();
        u.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        u.send(b"rejected").unwrap();
        let rej_udp = u.recv(&mut [0u8; 16]).map(|_| ());
        let drop_tcp =
            TcpStream::connect_timeout(&(host, DROP_TCP).into(), Duration::from_millis(700))
                .map(|_| ());
        let d = UdpSocket::bind(("0.0.0.0", 0)).unwrap();
        d.connect((host, DROP_UDP)).unwrap();
        d.set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        d.send(b"dropped").unwrap();
        let drop_udp = d.recv(&mut [0u8; 16]).map(|_| ());
        (rej_tcp, took, rej_udp, drop_tcp, drop_udp)
    });
    let e = rej_tcp.expect_err("connect to the rejected TCP port succeeded");
    assert_eq!(e.kind(), ErrorKind::ConnectionRefused, "{hook}: {e}");
    assert!(
        took < Duration::from_secs(2),
        "{hook}: refused after {took:?}"
    );
    let e = rej_udp.expect_err("the rejected UDP port answered");
    assert_eq!(e.kind(), ErrorKind::ConnectionRefused, "{hook}: {e}");
    let e = drop_tcp.expect_err("connect to a dropped TCP port succeeded");
    assert_eq!(e.kind(), ErrorKind::TimedOut, "{hook}: {e}");
    let e = drop_udp.expect_err("the dropped UDP port answered");
    assert!(
        matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
        "{hook}: {e}"
    );
    // nothing unsolicited reached the host's listeners
    for l in &host_tcp {
        l.set_nonblocking(true).unwrap();
        assert!(l.accept().is_err(), "{hook}: a dropped connection arrived");
    }
    for u in &host_udp {
        assert!(
            u.recv_from(&mut [0u8; 16]).is_err(),
            "{hook}: a dropped datagram arrived"
        );
    }
}
