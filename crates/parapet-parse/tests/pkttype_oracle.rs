//! The kernel as the oracle for the link-layer packet type (`-m pkttype`,
//! nft `meta pkttype`) together with the destination address type: two
//! namespaces joined by a veth pair; the sender writes Ethernet frames
//! (AF_PACKET) to the receiver's MAC, to the broadcast MAC and to a
//! multicast MAC, carrying IPv4 packets of protocol 253 to the receiver's
//! address, to its subnet's broadcast address, to 255.255.255.255 and to
//! 224.0.0.1. The receiver's INPUT rules (iptables-legacy, then nft) count,
//! and the rule whose counter moved is compared with the linear engine's
//! decision, packet by packet. (A frame to another host's MAC, `otherhost`,
//! is dropped by the IP layer before any netfilter hook: not sent here.)

use parapet_model::{pkt_type, LinearEngine, NoSets, Packet};
use parapet_parse::{parse, Format};
use parapet_testbed::{require_root, Netns, Pair, Veth};
use std::io::Write;
use std::net::Ipv4Addr;
use std::process::Stdio;

const IPT: &str = "*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -p 253 -m pkttype --pkt-type broadcast -m addrtype --dst-type LOCAL -j ACCEPT
-A INPUT -p 253 -m pkttype --pkt-type multicast -m addrtype ! --dst-type MULTICAST -j ACCEPT
-A INPUT -p 253 -m pkttype ! --pkt-type unicast -m addrtype --dst-type BROADCAST -j ACCEPT
-A INPUT -p 253 -m addrtype --dst-type MULTICAST -m pkttype --pkt-type unicast -j ACCEPT
-A INPUT -p 253 -m pkttype --pkt-type unicast -m addrtype --dst-type BROADCAST -j ACCEPT
-A INPUT -p 253 -m pkttype --pkt-type multicast -j ACCEPT
-A INPUT -p 253 -m pkttype --pkt-type broadcast -j ACCEPT
-A INPUT -p 253 -j ACCEPT
COMMIT
";

const NFT: &str = "table ip t {
\tchain input {
\t\ttype filter hook input priority 0; policy accept;
\t\tip protocol 253 meta pkttype broadcast fib daddr type local counter accept
\t\tip protocol 253 meta pkttype multicast fib daddr type != multicast counter accept
\t\tip protocol 253 meta pkttype != host fib daddr type broadcast counter accept
\t\tip protocol 253 fib daddr type multicast pkttype host counter accept
\t\tip protocol 253 meta pkttype { host } fib daddr type broadcast counter accept
\t\tip protocol 253 meta pkttype { multicast, other } counter accept
\t\tip protocol 253 meta pkttype broadcast counter accept
\t\tip protocol 253 counter accept
\t}
}
";

const SRC: Ipv4Addr = Ipv4Addr::new(10, 250, 0, 1);
const LOCAL: Ipv4Addr = Ipv4Addr::new(10, 250, 0, 2);
/// A second address of the receiver, with a broadcast address.
const LOCAL2: Ipv4Addr = Ipv4Addr::new(10, 251, 0, 2);
const BCAST: Ipv4Addr = Ipv4Addr::new(10, 251, 0, 255);

fn pair(tag: &str) -> Pair {
    let v = Veth {
        prefix_len: 24,
        disable_ipv6: true,
        ..Veth::default()
    };
    let pair = Pair::create(tag, &v).unwrap();
    pair.b
        .ip(&["addr", "add", "10.251.0.2/24", "brd", "+", "dev", v.b_dev])
        .unwrap();
    pair
}

/// (destination MAC, packet) for every MAC kind and destination.
fn probes() -> Vec<([u8; 6], Packet)> {
    let b_mac = Veth::default().b_mac;
    let macs = [
        (b_mac, pkt_type::HOST),
        ([0xff; 6], pkt_type::BROADCAST),
        ([0x01, 0x00, 0x5e, 0x00, 0x00, 0x01], pkt_type::MULTICAST),
    ];
    let dsts = [
        LOCAL,
        BCAST,
        Ipv4Addr::BROADCAST,
        Ipv4Addr::new(224, 0, 0, 1),
    ];
    let local = [u32::from(LOCAL) as u128, u32::from(LOCAL2) as u128];
    let mut out = Vec::new();
    for (mac, t) in macs {
        for d in dsts {
            let mut p = Packet::v4(u32::from(SRC), u32::from(d), 253, 0, 0);
            p.len = 60;
            p.pkt_type = Some(t);
            p.set_host_addrs(&local, &[u32::from(BCAST) as u128]);
            out.push((mac, p));
        }
    }
    out
}

fn checksum(b: &[u8]) -> u16 {
    let mut s: u32 = b
        .chunks(2)
        .map(|c| u32::from(c[0]) << 8 | u32::from(*c.get(1).unwrap_or(&0)))
        .sum();
    while s > 0xffff {
        s = (s >> 16) + (s & 0xffff);
    }
    !(s as u16)
}

fn frame(mac: [u8; 6], p: &Packet) -> Vec<u8> {
    let mut f = mac.to_vec();
    f.extend_from_slice(&Veth::default().a_mac);
    f.extend_from_slice(&[0x08, 0x00]);
    let mut h = vec![0x45, 0, 0, 60, 0, 1, 0, 0, 64, 253, 0, 0];
    h.extend_from_slice(&(p.src as u32).to_be_bytes());
    h.extend_from_slice(&(p.dst as u32).to_be_bytes());
    let c = checksum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    h.resize(60, 0);
    f.extend_from_slice(&h);
    f
}

/// Writes one Ethernet frame to `dev` (AF_PACKET) in the calling thread's
/// namespace.
fn send_frame(dev: &str, frame: &[u8]) {
    let name = std::ffi::CString::new(dev).unwrap();
    // SAFETY: a packet socket this function owns; the pointers are to live
    // locals of the sizes passed.
    unsafe {
        let fd = libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0);
        assert!(
            fd >= 0,
            "packet socket: {}",
            std::io::Error::last_os_error()
        );
        let mut to: libc::sockaddr_ll = std::mem::zeroed();
        to.sll_family = libc::AF_PACKET as u16;
        to.sll_ifindex = libc::if_nametoindex(name.as_ptr()) as i32;
        to.sll_halen = 6;
        to.sll_addr[..6].copy_from_slice(&frame[..6]);
        let n = libc::sendto(
            fd,
            frame.as_ptr() as *const libc::c_void,
            frame.len(),
            0,
            &to as *const _ as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_ll>() as u32,
        );
        let err = std::io::Error::last_os_error();
        libc::close(fd);
        assert_eq!(n, frame.len() as isize, "sending a frame: {err}");
    }
}

/// The first rule whose counter moved (0: none).
fn first_moved(moved: &[u64]) -> u32 {
    moved
        .iter()
        .position(|&c| c > 0)
        .map_or(0, |i| i as u32 + 1)
}

/// Sends each probe from a to b and reads which of b's counters moved;
/// `counts` lists the counters in rule order. The frames cross a veth to
/// the other namespace's backlog: wait until a counter moves (bounded).
fn decisions(pair: &Pair, counts: &dyn Fn(&Netns) -> Vec<u64>) -> Vec<u32> {
    let dev = Veth::default().a_dev;
    let mut before = counts(&pair.b);
    probes()
        .iter()
        .map(|(mac, p)| {
            let f = frame(*mac, p);
            pair.a.run_in(|| send_frame(dev, &f));
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            loop {
                let after = counts(&pair.b);
                let moved: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
                if moved.iter().any(|&m| m > 0) || std::time::Instant::now() > deadline {
                    before = after;
                    return first_moved(&moved);
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        })
        .collect()
}

fn compare(rules: &str, name: &str, chain: &str, kernel: &[u32]) {
    let rs = parse(rules, name, Format::Auto).unwrap().ruleset;
    let engine = LinearEngine::new(&rs, rs.select_chain(Some(chain)).unwrap()).unwrap();
    let mut differ = Vec::new();
    for ((_, p), &k) in probes().iter().zip(kernel) {
        let ours = engine.classify(p, &NoSets).unwrap().rule_id;
        if ours != k {
            differ.push(format!("{name}: {p}: kernel rule {k}, parapet rule {ours}"));
        }
    }
    let distinct: std::collections::BTreeSet<u32> = kernel.iter().copied().collect();
    assert!(
        distinct.len() >= 6,
        "{name}: the kernel decided only {distinct:?}"
    );
    assert!(
        differ.is_empty(),
        "{} differ:\n{}",
        differ.len(),
        differ.join("\n")
    );
}

#[test]
#[ignore = "needs root"]
fn pkttype_agrees_with_iptables_legacy() {
    require_root();
    let pair = pair("p13-pkt-ipt");
    let mut restore = pair
        .b
        .command("iptables-legacy-restore")
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    restore
        .stdin
        .take()
        .unwrap()
        .write_all(IPT.as_bytes())
        .unwrap();
    assert!(
        restore.wait().unwrap().success(),
        "iptables-legacy-restore refused"
    );
    let counts = |ns: &Netns| -> Vec<u64> {
        let out = ns
            .exec(&["iptables-legacy", "-L", "INPUT", "-v", "-x", "-n"])
            .unwrap();
        out.lines()
            .skip(2)
            .map(|l| l.split_whitespace().next().unwrap().parse().unwrap())
            .collect()
    };
    let kernel = decisions(&pair, &counts);
    compare(IPT, "pkttype.v4", "filter/INPUT", &kernel);
}

#[test]
#[ignore = "needs root"]
fn pkttype_agrees_with_nft() {
    require_root();
    let pair = pair("p13-pkt-nft");
    let path = std::env::temp_dir().join(format!("parapet-pkttype-{}.nft", std::process::id()));
    std::fs::write(&path, NFT).unwrap();
    let loaded = pair.b.exec(&["nft", "-f", path.to_str().unwrap()]);
    let _ = std::fs::remove_file(&path);
    loaded.unwrap();
    let counts = |ns: &Netns| -> Vec<u64> {
        let out = ns
            .exec(&["nft", "list", "chain", "ip", "t", "input"])
            .unwrap();
        out.lines()
            .filter_map(|l| l.split("counter packets ").nth(1))
            .map(|rest| rest.split_whitespace().next().unwrap().parse().unwrap())
            .collect()
    };
    let kernel = decisions(&pair, &counts);
    compare(NFT, "pkttype.nft", "t/input", &kernel);
}
