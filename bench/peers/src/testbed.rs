//! The test bed: two network namespaces joined by one veth pair (the
//! shared [`parapet_testbed::Pair`]) with the bench's own extras: RPS, GRO
//! and a UDP sink on the filter side, and the counters rates come from.
//!
//! ```text
//!   netns pp-bench-<pid>-<seq>-a           netns pp-bench-<pid>-<seq>-b
//!   gen0 198.18.0.1/30  <== veth ==>  flt0 198.18.0.2/30
//!   generator (pinned to gen CPU)     filter under test, UDP sink :5001,
//!                                     RPS steers flt0's receive work to the
//!                                     filter CPU
//! ```
//!
//! Addresses come from 198.18.0.0/15, the range RFC 2544 reserves for
//! benchmarking, and exist only inside the two namespaces: nothing the bench
//! sends can leave them. Deleting a namespace deletes its veth end and every
//! iptables/nftables/ipset/xt_recent object created in it, so cleanup is
//! "delete both namespaces" — done in `Drop`, which also runs on panic
//! (unwinding) and after Ctrl-C (see [`crate::signal`]).

use crate::cmd;
use crate::error::Context;
use crate::{Error, Result};
use parapet_testbed::{Pair, Veth};
use std::fs::File;
use std::net::{Ipv4Addr, UdpSocket};
use std::os::fd::AsRawFd;

pub use parapet_testbed::mac_str;

/// Generator-side address.
pub const GEN_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
/// Filter-side address: traffic is sent here so it traverses INPUT.
pub const FLT_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
/// Generator-side MAC (locally administered).
pub const GEN_MAC: [u8; 6] = [0x02, 0x70, 0x70, 0x00, 0x00, 0x01];
/// Filter-side MAC (locally administered).
pub const FLT_MAC: [u8; 6] = [0x02, 0x70, 0x70, 0x00, 0x00, 0x02];
/// Interface name in the generator namespace.
pub const GEN_IF: &str = "gen0";
/// Interface name in the filter namespace.
pub const FLT_IF: &str = "flt0";
/// UDP port of the sink socket in the filter namespace.
pub const SINK_PORT: u16 = 5001;
/// UDP source port of generated traffic.
pub const SRC_PORT: u16 = 1024;
/// Tag of every namespace the bench creates (`pp-bench-<pid>-…`); used
/// to find leftovers.
pub const NS_TAG: &str = "bench";

/// Which namespace of the bed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// Where the generator runs.
    Gen,
    /// Where the filter under test runs.
    Filter,
}

/// Options for building a bed.
#[derive(Debug, Clone, Copy)]
pub struct BedOptions {
    /// CPU the generator thread is pinned to.
    pub gen_cpu: usize,
    /// CPU that receive processing (and thus filtering) is steered to with
    /// RPS; `None` leaves it on whichever CPU the sender runs, which makes
    /// generator and filter compete for one core.
    pub filter_cpu: Option<usize>,
}

impl Default for BedOptions {
    fn default() -> Self {
        let n = online_cpus();
        BedOptions {
            gen_cpu: 0,
            filter_cpu: if n >= 2 { Some(1) } else { None },
        }
    }
}

/// Number of online CPUs.
pub fn online_cpus() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// Snapshot of the counters used to compute rates.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// gen0 tx_packets: frames the generator got onto the wire.
    pub gen_tx: u64,
    /// gen0 tx_dropped: frames veth could not hand to the peer (backlog full).
    pub gen_tx_dropped: u64,
    /// flt0 rx_packets: frames that reached the filter-side interface.
    pub flt_rx: u64,
    /// flt0 rx_dropped.
    pub flt_rx_dropped: u64,
    /// Udp InDatagrams + RcvbufErrors in the filter namespace: datagrams that
    /// passed the INPUT hook and reached the UDP layer (the sink socket never
    /// reads, so most end as RcvbufErrors — cheaply, after filtering).
    pub udp_delivered: u64,
}

impl Counters {
    /// Component-wise difference `self - earlier` (wrapping, counters are
    /// monotonic).
    pub fn since(&self, earlier: &Counters) -> Counters {
        Counters {
            gen_tx: self.gen_tx.wrapping_sub(earlier.gen_tx),
            gen_tx_dropped: self.gen_tx_dropped.wrapping_sub(earlier.gen_tx_dropped),
            flt_rx: self.flt_rx.wrapping_sub(earlier.flt_rx),
            flt_rx_dropped: self.flt_rx_dropped.wrapping_sub(earlier.flt_rx_dropped),
            udp_delivered: self.udp_delivered.wrapping_sub(earlier.udp_delivered),
        }
    }
}

/// A live test bed. Dropping it deletes both namespaces.
pub struct Testbed {
    // Declared before `pair`: the socket closes before its namespace goes.
    sink: Option<UdpSocket>,
    /// Namespace a is the generator's, b the filter's.
    pair: Pair,
    opts: BedOptions,
    gen_ifindex: i32,
}

impl Testbed {
    /// Creates the namespaces, the veth pair, addresses, static neighbour
    /// entries (no ARP during measurements), RPS and the UDP sink.
    pub fn create(opts: BedOptions) -> Result<Testbed> {
        ensure_root()?;
        remove_stale();
        let veth = Veth {
            a_dev: GEN_IF,
            b_dev: FLT_IF,
            a_addr: GEN_IP,
            b_addr: FLT_IP,
            prefix_len: 30,
            a_mac: GEN_MAC,
            b_mac: FLT_MAC,
            ..Veth::default()
        };
        // From here on `bed` is the guard: any `?` below drops it, which
        // deletes both namespaces.
        let mut bed = Testbed {
            sink: None,
            pair: Pair::create(NS_TAG, &veth).map_err(Error)?,
            opts,
            gen_ifindex: 0,
        };
        let f = bed.pair.b.name().to_string();
        if let Some(cpu) = opts.filter_cpu {
            // sysfs shows the namespace's devices only when mounted inside
            // it, which `ip netns exec` does for us.
            let mask = format!("{:x}", 1u64 << cpu);
            let path = format!("/sys/class/net/{FLT_IF}/queues/rx-0/rps_cpus");
            cmd::run(
                "ip",
                &[
                    "netns",
                    "exec",
                    &f,
                    "sh",
                    "-c",
                    &format!("echo {mask} > {path}"),
                ],
                None,
            )
            .context("enabling RPS on the filter side")?;
        }
        // GRO on flt0 makes veth run NAPI for it, which the XDP generator
        // needs (veth refuses XDP frames for a peer without NAPI). Frames
        // from sockets are unaffected: veth only uses NAPI for them when
        // gen0 has no TSO, and UDP is not merged without a UDP_GRO socket.
        if cmd::have("ethtool") {
            cmd::run(
                "ip",
                &["netns", "exec", &f, "ethtool", "-K", FLT_IF, "gro", "on"],
                None,
            )
            .context("enabling GRO on the filter side")?;
        }
        bed.gen_ifindex = bed.in_ns(Side::Gen, || ifindex(GEN_IF))??;
        let sink = bed.in_ns(Side::Filter, || -> Result<UdpSocket> {
            let s = UdpSocket::bind((FLT_IP, SINK_PORT))?;
            // A tiny receive buffer: the sink never reads, so datagrams are
            // counted (RcvbufErrors) and freed right after the UDP lookup.
            set_int_opt(s.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, 4096)?;
            Ok(s)
        })??;
        bed.sink = Some(sink);
        Ok(bed)
    }

    /// Namespace name of one side.
    pub fn ns(&self, side: Side) -> &str {
        match side {
            Side::Gen => self.pair.a.name(),
            Side::Filter => self.pair.b.name(),
        }
    }

    /// Options the bed was built with.
    pub fn options(&self) -> BedOptions {
        self.opts
    }

    /// Interface index of gen0 inside the generator namespace.
    pub fn gen_ifindex(&self) -> i32 {
        self.gen_ifindex
    }

    /// Runs `f` on a fresh thread that has joined the namespace of `side`.
    ///
    /// Network namespaces are per thread, so sockets created and processes
    /// spawned by `f` live in that namespace, and `/proc/thread-self/net`
    /// shows its counters; the rest of the program is unaffected. Spawning
    /// tools this way avoids `ip netns exec`'s own start-up cost in timings.
    pub fn in_ns<T: Send>(&self, side: Side, f: impl FnOnce() -> T + Send) -> Result<T> {
        let path = format!("/run/netns/{}", self.ns(side));
        let file = File::open(&path).context(format!("opening {path}"))?;
        std::thread::scope(|s| {
            s.spawn(move || -> Result<T> {
                parapet_testbed::enter(&file).map_err(Error)?;
                Ok(f())
            })
            .join()
            .map_err(|_| Error::msg("thread inside the namespace panicked"))?
        })
    }

    /// Reads all counters of both sides.
    pub fn counters(&self) -> Result<Counters> {
        let (gen_tx, gen_tx_dropped) = self.in_ns(Side::Gen, || -> Result<(u64, u64)> {
            let dev = read_dev(GEN_IF)?;
            Ok((dev.tx_packets, dev.tx_dropped))
        })??;
        let (flt_rx, flt_rx_dropped, udp_delivered) =
            self.in_ns(Side::Filter, || -> Result<(u64, u64, u64)> {
                let dev = read_dev(FLT_IF)?;
                let udp = read_snmp("Udp")?;
                let get = |k: &str| udp.iter().find(|(n, _)| n == k).map_or(0, |(_, v)| *v);
                Ok((
                    dev.rx_packets,
                    dev.rx_dropped,
                    get("InDatagrams") + get("RcvbufErrors"),
                ))
            })??;
        Ok(Counters {
            gen_tx,
            gen_tx_dropped,
            flt_rx,
            flt_rx_dropped,
            udp_delivered,
        })
    }
}

/// Fails unless running as root with iproute2 (namespaces and netfilter
/// need it).
pub fn ensure_root() -> Result<()> {
    parapet_testbed::check_root().map_err(Error)
}

/// Deletes namespaces left behind by bench processes that no longer exist
/// (e.g. killed with SIGKILL, which no handler can catch). Returns the names
/// removed.
pub fn remove_stale() -> Vec<String> {
    parapet_testbed::remove_stale(NS_TAG)
}

/// Pins the calling thread to one CPU.
pub fn pin_current_thread(cpu: usize) -> Result<()> {
    // SAFETY: cpu_set_t is plain data; CPU_SET stays in bounds for cpu <
    // CPU_SETSIZE, which we check; pid 0 means the calling thread.
    unsafe {
        if cpu >= libc::CPU_SETSIZE as usize {
            return Err(Error(format!("CPU {cpu} out of range")));
        }
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(Error(format!(
                "sched_setaffinity({cpu}): {}",
                std::io::Error::last_os_error()
            )));
        }
    }
    Ok(())
}

pub(crate) fn set_int_opt(fd: i32, level: i32, name: i32, val: i32) -> Result<()> {
    // SAFETY: passing a pointer to a live c_int and its size.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            &val as *const i32 as *const libc::c_void,
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(Error(format!(
            "setsockopt({level},{name}): {}",
            std::io::Error::last_os_error()
        )));
    }
    Ok(())
}

fn ifindex(name: &str) -> Result<i32> {
    let c = std::ffi::CString::new(name).map_err(Error::msg)?;
    // SAFETY: c is a valid NUL-terminated string.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        return Err(Error(format!("no interface {name}")));
    }
    Ok(idx as i32)
}

/// Interface counters from `/proc/net/dev`.
#[derive(Debug, Clone, Copy, Default)]
pub struct DevStats {
    /// Received packets.
    pub rx_packets: u64,
    /// Receive drops.
    pub rx_dropped: u64,
    /// Transmitted packets.
    pub tx_packets: u64,
    /// Transmit drops.
    pub tx_dropped: u64,
}

/// Parses one interface's line of `/proc/net/dev` text.
pub fn parse_dev(text: &str, ifname: &str) -> Option<DevStats> {
    for line in text.lines() {
        let Some((name, rest)) = line.split_once(':') else {
            continue;
        };
        if name.trim() != ifname {
            continue;
        }
        let v: Vec<u64> = rest
            .split_whitespace()
            .filter_map(|x| x.parse().ok())
            .collect();
        if v.len() < 12 {
            return None;
        }
        return Some(DevStats {
            rx_packets: v[1],
            rx_dropped: v[3],
            tx_packets: v[9],
            tx_dropped: v[11],
        });
    }
    None
}

/// Parses one protocol's header/value line pair of `/proc/net/snmp` text.
pub fn parse_snmp(text: &str, proto: &str) -> Vec<(String, u64)> {
    let prefix = format!("{proto}:");
    let lines: Vec<&str> = text.lines().filter(|l| l.starts_with(&prefix)).collect();
    if lines.len() < 2 {
        return Vec::new();
    }
    let names = lines[0].split_whitespace().skip(1);
    let vals = lines[1].split_whitespace().skip(1);
    names
        .zip(vals)
        .filter_map(|(n, v)| v.parse().ok().map(|v| (n.to_string(), v)))
        .collect()
}

// `/proc/thread-self/net` follows the calling thread's namespace, unlike
// `/proc/net` (the process's).
fn read_dev(ifname: &str) -> Result<DevStats> {
    let text = std::fs::read_to_string("/proc/thread-self/net/dev")?;
    parse_dev(&text, ifname).ok_or_else(|| Error(format!("no {ifname} in /proc/net/dev")))
}

fn read_snmp(proto: &str) -> Result<Vec<(String, u64)>> {
    let text = std::fs::read_to_string("/proc/thread-self/net/snmp")?;
    Ok(parse_snmp(&text, proto))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_net_dev() {
        let t = "Inter-|   Receive |  Transmit\n face |bytes packets errs drop fifo frame compressed multicast|bytes packets errs drop fifo colls carrier compressed\n  flt0: 100 7 0 2 0 0 0 0 200 9 0 3 0 0 0 0\n";
        let d = parse_dev(t, "flt0").unwrap();
        assert_eq!(
            (d.rx_packets, d.rx_dropped, d.tx_packets, d.tx_dropped),
            (7, 2, 9, 3)
        );
        assert!(parse_dev(t, "gen0").is_none());
    }

    #[test]
    fn parses_snmp() {
        let t = "Udp: InDatagrams NoPorts InErrors\nUdp: 5 6 7\nUdpLite: InDatagrams\nUdpLite: 1\n";
        assert_eq!(
            parse_snmp(t, "Udp"),
            vec![
                ("InDatagrams".into(), 5),
                ("NoPorts".into(), 6),
                ("InErrors".into(), 7)
            ]
        );
    }
}
