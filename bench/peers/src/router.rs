//! The FORWARD-position bed (issue 14, item 6): a router namespace between
//! two host namespaces, forwarding on, and the two traffic forms measured
//! through it — a UDP packet flood counted at the receiver, and a TCP
//! stream (`iperf3`) with the MTU set for a given frame size.
//!
//! ```text
//!  netns …-a (sender)         netns …-r (router, filter)          netns …-b (receiver)
//!  fa0 198.18.1.1/24 <veth> fr0 198.18.1.2/24   fr1 198.18.2.1/24 <veth> fb0 198.18.2.2/24
//! ```
//!
//! Addresses are from 198.18.0.0/15 (RFC 2544's benchmarking block) and exist
//! only in the three namespaces, which are deleted on drop.

use crate::testbed::{parse_snmp, pin_current_thread};
use crate::{Error, Result};
use parapet_testbed::Netns;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Namespace tag of the router bed (`pp-fwd-<pid>-<seq>`).
pub const FWD_TAG: &str = "fwd";
/// Sender address.
pub const SRC_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 1, 1);
/// Receiver address.
pub const DST_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 2, 2);
/// Router's interface towards the sender (the filter's `-i`).
pub const IN_IF: &str = "fr0";
/// Router's interface towards the receiver (the filter's `-o`).
pub const OUT_IF: &str = "fr1";
/// Source port of both measured flows (iperf3 `--cport` for TCP).
pub const SRC_PORT: u16 = 1024;
/// UDP sink port of the flood.
pub const UDP_PORT: u16 = 5001;
/// iperf3's port.
pub const TCP_PORT: u16 = 5201;
/// Longest an iperf3 client may run beyond its `-t`.
const IPERF_SLACK: Duration = Duration::from_secs(20);

/// The three namespaces and two veth pairs; deleted on drop (fields drop in
/// order; each namespace takes its veth ends with it).
pub struct RouterBed {
    sender: Netns,
    router: Netns,
    receiver: Netns,
    iperf: Option<Child>,
    _sink: Option<UdpSocket>,
}

fn ns_exec(ns: &Netns, argv: &[&str]) -> Result<String> {
    ns.exec(argv).map_err(Error)
}

impl RouterBed {
    /// Builds the bed: namespaces, veth pairs without offloads (every frame
    /// is its own packet at the router), addresses, routes, static
    /// neighbours, forwarding on, the UDP sink and the iperf3 server.
    pub fn create() -> Result<RouterBed> {
        let sender = Netns::create(FWD_TAG).map_err(Error)?;
        let router = Netns::create(FWD_TAG).map_err(Error)?;
        let receiver = Netns::create(FWD_TAG).map_err(Error)?;
        let mut bed = RouterBed {
            sender,
            router,
            receiver,
            iperf: None,
            _sink: None,
        };
        bed.wire()?;
        Ok(bed)
    }

    fn wire(&mut self) -> Result<()> {
        let (a, r, b) = (
            self.sender.name().to_string(),
            self.router.name().to_string(),
            self.receiver.name().to_string(),
        );
        let macs = [
            ("fa0", "02:70:71:00:01:01"),
            ("fr0", "02:70:71:00:01:02"),
            ("fr1", "02:70:71:00:02:01"),
            ("fb0", "02:70:71:00:02:02"),
        ];
        let ip = |args: &[&str]| parapet_testbed::ip(args).map_err(Error);
        ip(&[
            "link", "add", "fa0", "netns", &a, "address", macs[0].1, "type", "veth", "peer",
            "name", "fr0", "netns", &r, "address", macs[1].1,
        ])?;
        ip(&[
            "link", "add", "fr1", "netns", &r, "address", macs[2].1, "type", "veth", "peer",
            "name", "fb0", "netns", &b, "address", macs[3].1,
        ])?;
        let ends: [(&Netns, &str, &str); 4] = [
            (&self.sender, "fa0", "198.18.1.1/24"),
            (&self.router, "fr0", "198.18.1.2/24"),
            (&self.router, "fr1", "198.18.2.1/24"),
            (&self.receiver, "fb0", "198.18.2.2/24"),
        ];
        for (ns, dev, addr) in ends {
            ns.ip(&["addr", "add", addr, "dev", dev]).map_err(Error)?;
            ns.ip(&["link", "set", dev, "up"]).map_err(Error)?;
            // One packet per frame through the router: no TSO/GSO on the
            // senders, no GRO on the receivers (nf-HiPAC's NICs had none).
            ns_exec(
                ns,
                &[
                    "ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off",
                ],
            )?;
        }
        self.sender
            .ip(&["route", "add", "default", "via", "198.18.1.2"])
            .map_err(Error)?;
        self.receiver
            .ip(&["route", "add", "default", "via", "198.18.2.1"])
            .map_err(Error)?;
        // Static neighbours: no ARP during a measurement.
        let neigh = [
            (&self.sender, "198.18.1.2", macs[1].1, "fa0"),
            (&self.router, "198.18.1.1", macs[0].1, "fr0"),
            (&self.router, "198.18.2.2", macs[3].1, "fr1"),
            (&self.receiver, "198.18.2.1", macs[2].1, "fb0"),
        ];
        for (ns, addr, mac, dev) in neigh {
            ns.static_neighbour(addr, mac, dev).map_err(Error)?;
        }
        ns_exec(
            &self.router,
            &["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"],
        )?;
        // iperf3 runs fix the client port; the next run must not wait for
        // the previous connection's TIME_WAIT.
        ns_exec(
            &self.sender,
            &["sysctl", "-q", "-w", "net.ipv4.tcp_tw_reuse=1"],
        )?;
        // The flood's sink: never read, 4 KiB buffer, so a datagram that
        // reached UDP ends at once (InDatagrams or RcvbufErrors).
        let sink = self.receiver.run_in(|| -> Result<UdpSocket> {
            let s = UdpSocket::bind(SocketAddrV4::new(DST_IP, UDP_PORT))?;
            set_int_opt(&s, libc::SO_RCVBUF, 4096)?;
            Ok(s)
        })?;
        self._sink = Some(sink);
        let child = self
            .receiver
            .command("iperf3")
            .args(["-s", "-B", "198.18.2.2", "-p", &TCP_PORT.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| Error(format!("iperf3 -s: {e}")))?;
        self.iperf = Some(child);
        Ok(())
    }

    /// The router namespace, where the filter under test runs.
    pub fn router(&self) -> &Netns {
        &self.router
    }

    /// Sets the MTU of all four interfaces so that a full TCP segment is a
    /// `frame`-byte Ethernet frame (nominal, with the 4-byte FCS).
    pub fn set_frame(&self, frame: usize) -> Result<()> {
        let mtu = (frame - 18).to_string();
        for (ns, dev) in [
            (&self.sender, "fa0"),
            (&self.router, "fr0"),
            (&self.router, "fr1"),
            (&self.receiver, "fb0"),
        ] {
            ns.ip(&["link", "set", dev, "mtu", &mtu]).map_err(Error)?;
        }
        Ok(())
    }

    fn delivered(&self) -> Result<u64> {
        self.receiver.run_in(|| -> Result<u64> {
            let text = std::fs::read_to_string("/proc/thread-self/net/snmp")?;
            let udp = parse_snmp(&text, "Udp");
            let get = |k: &str| udp.iter().find(|(n, _)| n == k).map_or(0, |(_, v)| *v);
            Ok(get("InDatagrams") + get("RcvbufErrors"))
        })
    }

    fn no_ports(&self) -> Result<u64> {
        self.receiver.run_in(|| -> Result<u64> {
            let text = std::fs::read_to_string("/proc/thread-self/net/snmp")?;
            let udp = parse_snmp(&text, "Udp");
            Ok(udp
                .iter()
                .find(|(n, _)| n == "NoPorts")
                .map_or(0, |(_, v)| *v))
        })
    }

    /// Sends `count` datagrams from 198.18.1.1:1024 to 198.18.2.2:`port`
    /// (a closed port) and returns how many reached the receiver's UDP
    /// layer (its `NoPorts` counter): the check that a filter is in force.
    pub fn probe(&self, port: u16, count: u64) -> Result<u64> {
        let before = self.no_ports()?;
        self.sender.run_in(|| -> Result<()> {
            let s = UdpSocket::bind(SocketAddrV4::new(SRC_IP, SRC_PORT))?;
            for _ in 0..count {
                // ICMP errors from the closed port may fail a later send.
                let _ = s.send_to(b"probe", SocketAddrV4::new(DST_IP, port));
            }
            Ok(())
        })?;
        // Delivery is synchronous on veth; a moment for the last softirq.
        std::thread::sleep(Duration::from_millis(50));
        Ok(self.no_ports()? - before)
    }

    /// Floods 64-byte frames (UDP 198.18.1.1:1024 → 198.18.2.2:5001) from
    /// the sender, pinned to CPU 0, and returns the datagrams per second
    /// that reached the receiver's UDP layer in `window` after `warmup`.
    pub fn flood(&self, warmup: Duration, window: Duration) -> Result<f64> {
        let stop = Arc::new(AtomicBool::new(false));
        let sock = self.sender.run_in(|| -> Result<UdpSocket> {
            let s = UdpSocket::bind(SocketAddrV4::new(SRC_IP, SRC_PORT))?;
            s.connect(SocketAddrV4::new(DST_IP, UDP_PORT))?;
            Ok(s)
        })?;
        let flag = stop.clone();
        let limit = warmup + window + Duration::from_secs(5);
        let sender = std::thread::spawn(move || send_loop(&sock, &flag, limit));
        std::thread::sleep(warmup);
        let before = self.delivered();
        let t0 = Instant::now();
        std::thread::sleep(window);
        let after = self.delivered();
        let secs = t0.elapsed().as_secs_f64();
        stop.store(true, Ordering::Relaxed);
        sender
            .join()
            .map_err(|_| Error("flood sender panicked".into()))??;
        Ok((after? - before?) as f64 / secs)
    }

    /// One iperf3 TCP stream from the sender to the receiver for `secs`
    /// seconds; returns the receiver's goodput in Mbit/s.
    ///
    /// The client port is fixed, and `tcp_tw_reuse` only reuses a TIME_WAIT
    /// entry older than a second: a run started at once after the previous
    /// one can find its port taken. It then waits that second out and
    /// tries again (at most `PORT_RETRIES` times).
    pub fn tcp_stream(&self, secs: u32) -> Result<f64> {
        const PORT_RETRIES: usize = 3;
        let mut tries = 0;
        loop {
            match self.tcp_stream_once(secs) {
                Err(Error(e)) if e.contains("Address already in use") && tries < PORT_RETRIES => {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(1500));
                }
                other => return other,
            }
        }
    }

    fn tcp_stream_once(&self, secs: u32) -> Result<f64> {
        let mut child = self
            .sender
            .command("iperf3")
            .args([
                "-c",
                "198.18.2.2",
                "-p",
                &TCP_PORT.to_string(),
                "--cport",
                &SRC_PORT.to_string(),
                "-t",
                &secs.to_string(),
                "-J",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| Error(format!("iperf3 -c: {e}")))?;
        let deadline = Instant::now() + Duration::from_secs(secs.into()) + IPERF_SLACK;
        loop {
            if child.try_wait()?.is_some() {
                break;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(Error("iperf3 client did not finish in time".into()));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let out = child.wait_with_output()?;
        let text = String::from_utf8_lossy(&out.stdout);
        iperf_mbits(&text)
    }
}

impl Drop for RouterBed {
    fn drop(&mut self) {
        if let Some(mut c) = self.iperf.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Receiver-side Mbit/s from iperf3's `-J` output.
pub fn iperf_mbits(json: &str) -> Result<f64> {
    let v: serde_json::Value =
        serde_json::from_str(json).map_err(|e| Error(format!("iperf3 output: {e}")))?;
    if let Some(err) = v.get("error").and_then(|e| e.as_str()) {
        return Err(Error(format!("iperf3: {err}")));
    }
    v.pointer("/end/sum_received/bits_per_second")
        .and_then(|b| b.as_f64())
        .map(|b| b / 1e6)
        .ok_or_else(|| Error("iperf3 output has no end.sum_received".into()))
}

fn set_int_opt(s: &UdpSocket, opt: libc::c_int, val: libc::c_int) -> Result<()> {
    // SAFETY: a valid fd and a pointer to a live c_int of the size given.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            opt,
            (&val as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    Ok(())
}

/// Sends 18-byte datagrams (64-byte nominal frames) with `sendmmsg`, 64 at a
/// time, until `stop` or `limit`. veth delivers in the sender's context, so
/// the router's forwarding (and the filter) runs on this CPU: the rate is
/// what the router can forward, the sender never outruns it by much.
fn send_loop(sock: &UdpSocket, stop: &AtomicBool, limit: Duration) -> Result<()> {
    let _ = pin_current_thread(0);
    const BATCH: usize = 64;
    let mut payload = [0u8; 18];
    let mut iov: Vec<libc::iovec> = (0..BATCH)
        .map(|_| libc::iovec {
            iov_base: payload.as_mut_ptr().cast(),
            iov_len: payload.len(),
        })
        .collect();
    // SAFETY: mmsghdr is plain data; zeroed is a valid empty header.
    let mut msgs: Vec<libc::mmsghdr> = (0..BATCH).map(|_| unsafe { std::mem::zeroed() }).collect();
    for (m, v) in msgs.iter_mut().zip(iov.iter_mut()) {
        m.msg_hdr.msg_iov = v;
        m.msg_hdr.msg_iovlen = 1;
    }
    let t0 = Instant::now();
    while !stop.load(Ordering::Relaxed) && t0.elapsed() < limit {
        // SAFETY: msgs points at BATCH headers whose iovecs point at
        // `payload`, all alive for the call; the socket is connected.
        let n = unsafe {
            libc::sendmmsg(
                sock.as_raw_fd(),
                msgs.as_mut_ptr(),
                BATCH as libc::c_uint,
                0,
            )
        };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            // A full queue or an ICMP error from a previous datagram is
            // part of flooding; anything else ends the run.
            match e.raw_os_error() {
                Some(libc::ENOBUFS | libc::EAGAIN | libc::ECONNREFUSED | libc::EPERM) => {
                    std::thread::yield_now()
                }
                _ => return Err(e.into()),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_iperf_json() {
        let j = r#"{"end":{"sum_received":{"bits_per_second":123000000.0}}}"#;
        assert_eq!(iperf_mbits(j).unwrap(), 123.0);
        assert!(iperf_mbits(r#"{"error":"unable to connect"}"#).is_err());
        assert!(iperf_mbits("not json").is_err());
    }
}
