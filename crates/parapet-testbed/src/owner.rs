//! Packets this host sends as given users, for the socket owner's kernel
//! oracles (`-m owner`, nft `meta skuid|skgid`): UDP datagrams from
//! processes running with a uid and gid (`setpriv`), and the reset the
//! kernel itself sends for a closed TCP port (a packet of the kernel's own
//! socket, which has no file). Shared by `parapet-parse`'s
//! `owner_kernel.rs` (the linear engine against the kernel) and
//! `parapet-cli`'s `netfilter_oracle_owner.rs` (parapetd's BPF program
//! against the kernel).

use crate::Netns;
use std::io::Read;
use std::net::{IpAddr, TcpListener, TcpStream, UdpSocket};
use std::time::Duration;

/// Which datagrams arrive at `addr` (a loopback address) in `ns` when each
/// sender `(uid, gid)` sends one to each of `ports` (datagram index =
/// sender × `ports.len()` + port index).
pub fn udp_arrivals(ns: &Netns, addr: IpAddr, senders: &[(u32, u32)], ports: &[u16]) -> Vec<bool> {
    udp_arrivals_at(ns, ns, addr, senders, ports)
}

/// [`udp_arrivals`] with the receivers in `rx_ns` (`addr` one of its
/// addresses): the datagrams leave `ns` by the interface its route to
/// `addr` names (a veth to `rx_ns`, say).
pub fn udp_arrivals_at(
    ns: &Netns,
    rx_ns: &Netns,
    addr: IpAddr,
    senders: &[(u32, u32)],
    ports: &[u16],
) -> Vec<bool> {
    let rx: Vec<UdpSocket> = rx_ns.run_in(|| {
        ports
            .iter()
            .map(|&p| {
                let s = UdpSocket::bind((addr, p)).unwrap();
                s.set_nonblocking(true).unwrap();
                s
            })
            .collect()
    });
    for (i, (uid, gid)) in senders.iter().enumerate() {
        // One bash per sender: a socket per datagram, opened as that
        // user, whose file carries the credentials the kernel reads.
        // A dropped datagram fails its send (EPERM): the script goes on.
        let script: String = ports
            .iter()
            .enumerate()
            .map(|(k, p)| {
                format!(
                    "printf '{}' > /dev/udp/{addr}/{p} 2>/dev/null; ",
                    i * ports.len() + k
                )
            })
            .chain(["true".to_string()])
            .collect();
        let out = ns
            .command("setpriv")
            .args([
                &format!("--reuid={uid}"),
                &format!("--regid={gid}"),
                "--clear-groups",
                "bash",
                "-c",
                &script,
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "setpriv: {out:?}");
    }
    std::thread::sleep(Duration::from_millis(300));
    let mut arrived = vec![false; senders.len() * ports.len()];
    for r in &rx {
        let mut buf = [0u8; 8];
        // bounded: at most one datagram per sender on a port
        for _ in 0..=senders.len() {
            let Ok((n, _)) = r.recv_from(&mut buf) else {
                break;
            };
            let i: usize = std::str::from_utf8(&buf[..n]).unwrap().parse().unwrap();
            arrived[i] = true;
        }
    }
    arrived
}

/// Whether the kernel's reset for a connection attempt to closed TCP port
/// `port` of `addr` (a loopback address) in `ns` arrives (the connect is
/// refused), or is dropped on its way out (the connect times out after
/// 1.5 s). The reset leaves through OUTPUT without a socket of a user:
/// IPv4 sends it on the kernel's control socket (a socket without a
/// file), IPv6 with none (`tcp_v6_send_response`).
pub fn reset_arrives(ns: &Netns, addr: IpAddr, port: u16) -> bool {
    ns.run_in(|| {
        match TcpStream::connect_timeout(&(addr, port).into(), Duration::from_millis(1500)) {
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => true,
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => false,
            other => panic!("connect to closed port {port}: {other:?}"),
        }
    })
}

/// Whether a connection to `addr`:`port` in `ns` is answered (the
/// listener's SYN-ACK arrives and the connect succeeds) while a process
/// running as `uid`/`gid` listens there, or the SYN-ACK is dropped on its
/// way out (the connect times out after 1.5 s). The SYN-ACK leaves with
/// the connection's request socket, which the kernel's owner matches
/// (`skb_to_full_sk`) answer for with the listener's owner.
pub fn synack_arrives(ns: &Netns, addr: IpAddr, port: u16, uid: u32, gid: u32) -> bool {
    let family = if addr.is_ipv6() {
        "AF_INET6"
    } else {
        "AF_INET"
    };
    let listen = format!(
        "import socket, time\n\
         s = socket.socket(socket.{family})\n\
         s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
         s.bind(('{addr}', {port}))\n\
         s.listen(4)\n\
         print('up', flush=True)\n\
         time.sleep(6)\n"
    );
    let mut child = ns
        .command("setpriv")
        .args([
            &format!("--reuid={uid}"),
            &format!("--regid={gid}"),
            "--clear-groups",
            "/usr/bin/python3",
            "-c",
            &listen,
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // wait for the listen (one line, or the end of the output)
    let mut up = String::new();
    let out = child.stdout.take().unwrap();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(out), &mut up).unwrap();
    assert_eq!(up.trim(), "up", "listener as {uid}/{gid} on {port}");
    let arrived = ns.run_in(|| {
        match TcpStream::connect_timeout(&(addr, port).into(), Duration::from_millis(1500)) {
            Ok(_) => true,
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => false,
            Err(e) => panic!("connect to {port}: {e}"),
        }
    });
    let _ = child.kill();
    let _ = child.wait();
    arrived
}

/// Whether the last ACK of a connection whose client closed first arrives:
/// a process running as `uid`/`gid` in `ns` connects to `addr`:`port`
/// (a loopback address) and closes at once; the server (this process)
/// reads the end and, once the client's socket has become a time-wait
/// socket (its FIN acknowledged: the closed socket is handed over to the
/// kernel's time-wait table), sends its own FIN. The ACK answering it is
/// sent for the time-wait socket, which has no full socket and so no owner
/// (`skb_to_full_sk` gives none). Arrived: the server's socket has left
/// LAST-ACK 600 ms later (`ss`); dropped: it is still there, retrying its
/// FIN. Panics unless a time-wait socket was made.
pub fn timewait_ack_arrives(ns: &Netns, addr: IpAddr, port: u16, uid: u32, gid: u32) -> bool {
    let listener = ns.run_in(|| TcpListener::bind((addr, port)).unwrap());
    let family = if addr.is_ipv6() {
        "AF_INET6"
    } else {
        "AF_INET"
    };
    let client = format!(
        "import socket\n\
         s = socket.socket(socket.{family})\n\
         s.connect(('{addr}', {port}))\n\
         s.close()\n"
    );
    let out = ns
        .command("setpriv")
        .args([
            &format!("--reuid={uid}"),
            &format!("--regid={gid}"),
            "--clear-groups",
            "/usr/bin/python3",
            "-c",
            &client,
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "client as {uid}/{gid}: {out:?}");
    // the connection is queued (the client's handshake ACK was its own
    // socket's, which the oracle's rules leave alone)
    listener.set_nonblocking(true).unwrap();
    let mut conn = None;
    for _ in 0..30 {
        if let Ok((c, _)) = listener.accept() {
            conn = Some(c);
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut conn = conn.unwrap_or_else(|| panic!("no connection on {port}"));
    conn.set_nonblocking(false).unwrap();
    conn.set_read_timeout(Some(Duration::from_millis(1500)))
        .unwrap();
    let mut buf = [0u8; 8];
    assert_eq!(conn.read(&mut buf).unwrap(), 0, "the client's FIN");
    // past the delayed ACK (at most 200 ms): the client's FIN is
    // acknowledged, its closed socket a time-wait one
    std::thread::sleep(Duration::from_millis(400));
    conn.shutdown(std::net::Shutdown::Write).unwrap();
    std::thread::sleep(Duration::from_millis(600));
    let ss = |state: &str, side: &str| {
        ns.exec(&[
            "ss",
            "-Htn",
            "state",
            state,
            "(",
            side,
            "=",
            &format!(":{port}"),
            ")",
        ])
        .unwrap()
    };
    assert!(
        !ss("time-wait", "dport").trim().is_empty(),
        "the client's socket on {port} is in TIME-WAIT"
    );
    ss("last-ack", "sport").trim().is_empty()
}
