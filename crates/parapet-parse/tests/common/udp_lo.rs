//! The kernel oracles' traffic for stateful matches: UDP datagrams from
//! loopback sources to 127.0.0.1 in a namespace, one at a time, and which
//! arrive; and an iptables-save file loaded into the namespace.

// Each test binary uses some of these.
#![allow(dead_code)]

use parapet_testbed::Netns;
use std::net::{Ipv4Addr, UdpSocket};
use std::time::Duration;

/// One datagram: (source address on lo, destination port, pause before it
/// in milliseconds).
pub type Send = (Ipv4Addr, u16, u64);

/// One datagram sent with an IP TTL of its own: ([`Send`], TTL).
pub type SendTtl = (Send, u8);

/// Which datagrams arrive at 127.0.0.1 in the namespace, and when each
/// was sent (nanoseconds after the first). Every source sends from port
/// 40000, with the default TTL of 64.
pub fn arrivals(ns: &Netns, seq: &[Send]) -> (Vec<bool>, Vec<u64>) {
    let seq: Vec<SendTtl> = seq.iter().map(|s| (*s, 64)).collect();
    arrivals_ttl(ns, &seq)
}

/// As [`arrivals`], each datagram sent with its own TTL.
pub fn arrivals_ttl(ns: &Netns, seq: &[SendTtl]) -> (Vec<bool>, Vec<u64>) {
    // The index rides in two bytes.
    assert!(seq.len() <= 65_536, "at most 65,536 datagrams per sequence");
    ns.run_in(|| {
        let mut ports: Vec<u16> = seq.iter().map(|s| s.0 .1).collect();
        ports.sort_unstable();
        ports.dedup();
        let rx: Vec<(u16, UdpSocket)> = ports
            .iter()
            .map(|p| {
                let s = UdpSocket::bind(("127.0.0.1", *p)).unwrap();
                s.set_read_timeout(Some(Duration::from_millis(60))).unwrap();
                (*p, s)
            })
            .collect();
        let mut srcs: Vec<Ipv4Addr> = seq.iter().map(|s| s.0 .0).collect();
        srcs.sort_unstable();
        srcs.dedup();
        let tx: Vec<(Ipv4Addr, UdpSocket)> = srcs
            .iter()
            .map(|a| (*a, UdpSocket::bind((*a, 40000)).unwrap()))
            .collect();
        let t0 = std::time::Instant::now();
        // Every datagram carries its index; any index read from a socket,
        // whenever it is read, arrived. A datagram delivered after its own
        // wait (softirq late on a loaded machine) is still an arrival, not
        // a drop, and does not shift the datagrams after it.
        let mut arrived = vec![false; seq.len()];
        let mut sent_at = Vec::with_capacity(seq.len());
        for (i, ((a, port, pause), ttl)) in seq.iter().enumerate() {
            let t = &tx.iter().find(|t| t.0 == *a).unwrap().1;
            let r = &rx.iter().find(|r| r.0 == *port).unwrap().1;
            std::thread::sleep(Duration::from_millis(*pause));
            t.set_ttl(u32::from(*ttl)).unwrap();
            sent_at.push(t0.elapsed().as_nanos() as u64);
            t.send_to(&(i as u16).to_le_bytes(), ("127.0.0.1", *port))
                .unwrap();
            // Bounded: until this datagram or the timeout.
            let mut buf = [0u8; 4];
            while let Ok((2, _)) = r.recv_from(&mut buf) {
                let k = usize::from(u16::from_le_bytes([buf[0], buf[1]]));
                arrived[k] = true;
                if k == i {
                    break;
                }
            }
        }
        // Late deliveries: drain every socket once more after a pause.
        std::thread::sleep(Duration::from_millis(200));
        for (_, r) in &rx {
            r.set_nonblocking(true).unwrap();
            let mut buf = [0u8; 4];
            while let Ok((2, _)) = r.recv_from(&mut buf) {
                arrived[usize::from(u16::from_le_bytes([buf[0], buf[1]]))] = true;
            }
        }
        (arrived, sent_at)
    })
}

/// Asserts that the kernel's fates tell something (a datagram arrived, one
/// did not) and that parapet's are the same, datagram by datagram; `what`
/// names the case in the messages.
pub fn assert_fates(what: &str, kernel: &[bool], parapet: &[bool]) {
    assert!(
        kernel.iter().any(|a| *a) && kernel.iter().any(|a| !*a),
        "{what}: the kernel's fates {kernel:?} do not tell anything"
    );
    assert_eq!(
        parapet, kernel,
        "{what}: parapet vs the kernel, datagram by datagram"
    );
}

/// Loads iptables-save `text` with `iptables-legacy-restore` through a
/// file of its own (the tests run at once).
pub fn load(ns: &Netns, name: &str, text: &str) {
    let file = std::env::temp_dir().join(format!("parapet-{name}-{}.v4", std::process::id()));
    std::fs::write(&file, text).unwrap();
    let loaded = ns.exec(&["iptables-legacy-restore", file.to_str().unwrap()]);
    let _ = std::fs::remove_file(&file);
    loaded.unwrap_or_else(|e| panic!("iptables-legacy-restore: {e}"));
}
