//! Packets this host sends as given users, for the socket owner's kernel
//! oracles (`-m owner`, nft `meta skuid|skgid`): UDP datagrams from
//! processes running with a uid and gid (`setpriv`), and the reset the
//! kernel itself sends for a closed TCP port (a packet of the kernel's own
//! socket, which has no file). Shared by `parapet-parse`'s
//! `owner_kernel.rs` (the linear engine against the kernel) and
//! `parapet-cli`'s `netfilter_oracle_owner.rs` (parapetd's BPF program
//! against the kernel).

use crate::Netns;
use std::net::{IpAddr, TcpStream, UdpSocket};
use std::time::Duration;

/// Which datagrams arrive at `addr` (a loopback address) in `ns` when each
/// sender `(uid, gid)` sends one to each of `ports` (datagram index =
/// sender × `ports.len()` + port index).
pub fn udp_arrivals(ns: &Netns, addr: IpAddr, senders: &[(u32, u32)], ports: &[u16]) -> Vec<bool> {
    let rx: Vec<UdpSocket> = ns.run_in(|| {
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
