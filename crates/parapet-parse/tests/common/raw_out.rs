//! Raw protocol-253 packets out through OUTPUT (to loopback, or to their
//! own destination) or as Ethernet frames over a veth, which kernel rule
//! counted each, and the comparison with the linear engine: the harness
//! of the kernel-oracle tests of IP header fields, marks, masked
//! comparisons, address types and packet types (protocol 253 is
//! experimental, so the kernel's own ICMP errors match no rule).

#![allow(dead_code)]

use parapet_model::routing::{key_value, RoutingHeader};
use parapet_model::{pkt_type, Family, LinearEngine, NoSets, Packet};
use parapet_parse::{parse, render, Format};
use parapet_testbed::{Netns, Pair, Veth};
use std::io::Write;
use std::net::Ipv4Addr;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The Internet checksum (RFC 1071) of `b`.
pub fn checksum(b: &[u8]) -> u16 {
    let mut s: u32 = b
        .chunks(2)
        .map(|c| u32::from(c[0]) << 8 | u32::from(*c.get(1).unwrap_or(&0)))
        .sum();
    while s > 0xffff {
        s = (s >> 16) + (s & 0xffff);
    }
    !(s as u16)
}

/// A protocol-253 packet with the packet's addresses, TTL, DSCP and L3
/// length, and for IPv6 its routing header ([`Packet::rt`]) if it has one
/// (sent to loopback by [`send`] whatever its destination).
pub fn wire(p: &Packet) -> Vec<u8> {
    match p.family {
        Family::V4 => {
            let mut h = vec![0x45, p.dscp << 2, 0, 0, 0, 1, 0, 0, p.ttl, 253, 0, 0];
            h.extend((p.src as u32).to_be_bytes());
            h.extend((p.dst as u32).to_be_bytes());
            h[2..4].copy_from_slice(&(p.len as u16).to_be_bytes());
            let c = checksum(&h);
            h[10..12].copy_from_slice(&c.to_be_bytes());
            h.resize(p.len as usize, 0xab);
            h
        }
        Family::V6 => {
            let mut h = vec![0u8; 40];
            h[0] = 0x60 | (p.dscp >> 2);
            h[1] = (p.dscp & 3) << 6;
            h[4..6].copy_from_slice(&(p.len as u16 - 40).to_be_bytes());
            h[6] = 253;
            h[7] = p.ttl;
            h[8..24].copy_from_slice(&p.src.to_be_bytes());
            h[24..40].copy_from_slice(&p.dst.to_be_bytes());
            // the packet's routing header, if it has one, before the payload
            if let Some(rt) = parapet_model::routing::from_key_value(p.rt as u128) {
                h[6] = 43;
                h.extend([253, rt.hdrlen, rt.rt_type, rt.segments_left]);
                h.resize(40 + (rt.hdrlen as usize + 1) * 8, 0);
                assert!(
                    h.len() <= p.len as usize,
                    "{p}: shorter than its routing header"
                );
            }
            h.resize(p.len as usize, 0xab);
            h
        }
    }
}

/// How [`send`] sends a packet.
#[derive(Clone, Copy, Default)]
pub enum Sender<'a> {
    /// To the loopback address, whatever the packet's destination.
    #[default]
    Loopback,
    /// To the packet's own destination, broadcasting allowed
    /// (`SO_BROADCAST`); multicast and limited-broadcast destinations,
    /// which need an output interface, leave bound to `group_dev`
    /// (`SO_BINDTODEVICE`).
    Destination { group_dev: &'a str },
}

/// Whether the destination is a group the kernel routes only out of a
/// named interface: multicast, or IPv4's limited broadcast.
fn needs_device(p: &Packet) -> bool {
    match p.family {
        Family::V4 => p.dst == 0xffff_ffff || p.dst >> 28 == 0xe,
        Family::V6 => p.dst >> 120 == 0xff,
    }
}

fn set_opt(fd: libc::c_int, opt: libc::c_int, value: &[u8], what: &str) {
    // SAFETY: `value` is a live slice of the length passed.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            opt,
            value.as_ptr() as *const libc::c_void,
            value.len() as u32,
        )
    };
    assert_eq!(rc, 0, "{what}: {}", std::io::Error::last_os_error());
}

/// Sends the packet as a raw IP packet (header included, [`wire`]) in the
/// calling thread's namespace, as `how` says.
pub fn send(p: &Packet, how: Sender) {
    if let Err(err) = send_wire(p, &wire(p), how) {
        panic!("sending {p}: {err}");
    }
}

/// Sends `pkt`, raw bytes from the IP header on, as [`send`] sends `p`'s
/// (its family and destination are `p`'s): for packets a [`Packet`]
/// cannot describe, like a truncated extension header. The error is
/// sendto's (`EPERM` when OUTPUT dropped the packet).
pub fn send_wire(p: &Packet, pkt: &[u8], how: Sender) -> std::io::Result<()> {
    let dst = match how {
        Sender::Loopback => match p.family {
            Family::V4 => u32::from(std::net::Ipv4Addr::LOCALHOST) as u128,
            Family::V6 => u128::from(std::net::Ipv6Addr::LOCALHOST),
        },
        Sender::Destination { .. } => p.dst,
    };
    let af = match p.family {
        Family::V4 => libc::AF_INET,
        Family::V6 => libc::AF_INET6,
    };
    // SAFETY: a raw socket this function owns.
    let fd = unsafe { libc::socket(af, libc::SOCK_RAW, libc::IPPROTO_RAW) };
    assert!(fd >= 0, "raw socket: {}", std::io::Error::last_os_error());
    if let Sender::Destination { group_dev } = how {
        set_opt(fd, libc::SO_BROADCAST, &1i32.to_ne_bytes(), "SO_BROADCAST");
        if needs_device(p) {
            let dev = std::ffi::CString::new(group_dev).unwrap();
            set_opt(
                fd,
                libc::SO_BINDTODEVICE,
                dev.as_bytes_with_nul(),
                "SO_BINDTODEVICE",
            );
        }
    }
    // SAFETY: the pointers are to live locals of the sizes passed.
    let n = unsafe {
        match p.family {
            Family::V4 => {
                let mut to: libc::sockaddr_in = std::mem::zeroed();
                to.sin_family = libc::AF_INET as libc::sa_family_t;
                to.sin_addr.s_addr = (dst as u32).to_be();
                libc::sendto(
                    fd,
                    pkt.as_ptr() as *const libc::c_void,
                    pkt.len(),
                    0,
                    &to as *const _ as *const libc::sockaddr,
                    std::mem::size_of::<libc::sockaddr_in>() as u32,
                )
            }
            Family::V6 => {
                let mut to: libc::sockaddr_in6 = std::mem::zeroed();
                to.sin6_family = libc::AF_INET6 as libc::sa_family_t;
                to.sin6_addr.s6_addr = dst.to_be_bytes();
                libc::sendto(
                    fd,
                    pkt.as_ptr() as *const libc::c_void,
                    pkt.len(),
                    0,
                    &to as *const _ as *const libc::sockaddr,
                    std::mem::size_of::<libc::sockaddr_in6>() as u32,
                )
            }
        }
    };
    let err = std::io::Error::last_os_error();
    // SAFETY: the socket opened above, closed once.
    unsafe { libc::close(fd) };
    if n < 0 {
        return Err(err);
    }
    assert_eq!(n, pkt.len() as isize, "sending {p}: a short write");
    Ok(())
}

/// Writes the packet ([`wire`], IPv4 or IPv6) as one Ethernet frame from `src_mac`
/// to `dst_mac` out of `dev` (AF_PACKET), in the calling thread's
/// namespace: the link-layer destination is the test's to choose.
pub fn send_frame(dev: &str, dst_mac: [u8; 6], src_mac: [u8; 6], p: &Packet) {
    let mut frame = dst_mac.to_vec();
    frame.extend_from_slice(&src_mac);
    frame.extend_from_slice(match p.family {
        Family::V4 => &[0x08, 0x00],
        Family::V6 => &[0x86, 0xdd],
    });
    frame.extend_from_slice(&wire(p));
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
        to.sll_addr[..6].copy_from_slice(&dst_mac);
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

/// Which rule counted the packet: the first counter that moved (0: none,
/// the policy). `counters` lists the chain's rule counters in order.
pub fn first_moved(counters: &[u64]) -> u32 {
    counters
        .iter()
        .position(|&c| c > 0)
        .map_or(0, |i| i as u32 + 1)
}

/// Loads the nft script into the namespace through a file of its own
/// (the tests run at once).
pub fn load_nft(ns: &Netns, script: &str) {
    let path = std::env::temp_dir().join(format!(
        "parapet-raw-out-{}-{}.nft",
        std::process::id(),
        ns.name()
    ));
    std::fs::write(&path, script).unwrap();
    let loaded = ns.exec(&["nft", "-f", path.to_str().unwrap()]);
    let _ = std::fs::remove_file(&path);
    loaded.unwrap();
}

/// The counters of an nft chain's rules, in order (every rule of the
/// chain must count).
pub fn nft_counters(ns: &Netns, family: &str, table: &str, chain: &str) -> Vec<u64> {
    let out = ns
        .exec(&["nft", "list", "chain", family, table, chain])
        .unwrap();
    out.lines()
        .filter_map(|l| l.split("counter packets ").nth(1))
        .map(|rest| rest.split_whitespace().next().unwrap().parse().unwrap())
        .collect()
}

/// The legacy tool of the family: `iptables-legacy` or `ip6tables-legacy`.
pub fn legacy_tool(family: Family) -> &'static str {
    match family {
        Family::V4 => "iptables-legacy",
        Family::V6 => "ip6tables-legacy",
    }
}

/// Loads iptables-save `rules` with the family's legacy restore tool.
pub fn load_legacy(ns: &Netns, rules: &str, family: Family) {
    let tool = legacy_tool(family);
    let mut restore = ns
        .command(format!("{tool}-restore"))
        .stdin(Stdio::piped())
        .spawn()
        .expect("iptables-legacy-restore");
    restore
        .stdin
        .take()
        .unwrap()
        .write_all(rules.as_bytes())
        .unwrap();
    assert!(
        restore.wait().unwrap().success(),
        "{tool}-restore refused the rules"
    );
}

/// The packet counters of a legacy chain's rules, in order.
pub fn legacy_counters(ns: &Netns, family: Family, chain: &str) -> Vec<u64> {
    let out = ns
        .exec(&[legacy_tool(family), "-L", chain, "-v", "-x", "-n"])
        .unwrap();
    out.lines()
        .skip(2)
        .map(|l| l.split_whitespace().next().unwrap().parse().unwrap())
        .collect()
}

/// The kernel's decisions for `packets`, sent as `how` says, under the
/// nft script: every rule counts, and the first counter that grew while a
/// packet passed decided (nft 1.0.6 cannot reset a rule's counter).
/// The script's table is `inet t`, its chain `output`.
pub fn nft_decisions(ns: &Netns, script: &str, packets: &[Packet], how: Sender) -> Vec<u32> {
    load_nft(ns, script);
    counted_decisions(
        ns,
        packets,
        || nft_counters(ns, "inet", "t", "output"),
        |p| send(p, how),
    )
}

/// Which rule decided each packet, for counters that are not reset
/// between packets: `send_one` sends it inside the namespace, and the
/// first of `counters` (the chain's rule counters, in order) that grew
/// while it passed decided (0: none, the policy).
pub fn counted_decisions(
    ns: &Netns,
    packets: &[Packet],
    counters: impl Fn() -> Vec<u64>,
    send_one: impl Fn(&Packet) + Sync,
) -> Vec<u32> {
    polled_decisions(packets, counters, |_, p| {
        ns.run_in(|| send_one(p));
        ((), Duration::ZERO)
    })
    .into_iter()
    .map(|(_, rule)| rule)
    .collect()
}

/// Which rule counted each probe, where a counter may move a while after
/// the packet passed (parapetd's reach its stats a moment later):
/// `send_one` sends probe i and returns what the test keeps of the
/// sending and how long to wait; `counters` (the chain's rule counters,
/// in order, never reset) are read until one grew or that time is up
/// (0: none grew, the policy).
pub fn polled_decisions<P, T>(
    probes: &[P],
    counters: impl Fn() -> Vec<u64>,
    mut send_one: impl FnMut(usize, &P) -> (T, Duration),
) -> Vec<(T, u32)> {
    let mut before = counters();
    probes
        .iter()
        .enumerate()
        .map(|(i, probe)| {
            let (kept, wait) = send_one(i, probe);
            let deadline = Instant::now() + wait;
            loop {
                let after = counters();
                let moved = after.iter().zip(&before).position(|(a, b)| a > b);
                if moved.is_some() || Instant::now() >= deadline {
                    before = after;
                    return (kept, moved.map_or(0, |r| r as u32 + 1));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        })
        .collect()
}

/// (sendto's errno, the rule that counted: 0 none) of each probe, raw
/// bytes sent as `p`'s ([`send_wire`], to loopback) in `ns`, by
/// [`polled_decisions`]: a counter may take up to 10 s to move for a
/// packet that left, 1 s for one sendto says OUTPUT dropped.
pub fn raw_decisions(
    ns: &Netns,
    p: &Packet,
    probes: &[Vec<u8>],
    counters: impl Fn() -> Vec<u64>,
) -> Vec<(Option<i32>, u32)> {
    polled_decisions(probes, counters, |_, bytes| {
        let sent = ns.run_in(|| send_wire(p, bytes, Sender::Loopback));
        let errno = sent.err().and_then(|e| e.raw_os_error());
        (
            errno,
            Duration::from_secs(if errno.is_some() { 1 } else { 10 }),
        )
    })
}

/// The kernel's decisions for `packets`, sent as `how` says, under
/// iptables-save `rules`.
pub fn iptables_decisions(
    ns: &Netns,
    rules: &str,
    family: Family,
    packets: &[Packet],
    how: Sender,
) -> Vec<u32> {
    load_legacy(ns, rules, family);
    packets
        .iter()
        .map(|p| {
            ns.exec(&[legacy_tool(family), "-Z", "OUTPUT"]).unwrap();
            ns.run_in(|| send(p, how));
            first_moved(&legacy_counters(ns, family, "OUTPUT"))
        })
        .collect()
}

/// Compares the kernel's decisions with the linear engine's on `chain` of
/// `rules`, packet by packet; the kernel must have decided by at least
/// `min_rules` distinct rules, or the comparison proves nothing.
pub fn agree(
    rules: &str,
    name: &str,
    chain: &str,
    packets: &[Packet],
    kernel: &[u32],
    min_rules: usize,
) {
    let rs = parse(rules, name, Format::Auto).unwrap().ruleset;
    let engine = LinearEngine::new(&rs, rs.select_chain(Some(chain)).unwrap()).unwrap();
    let mut differ = Vec::new();
    for (p, &k) in packets.iter().zip(kernel) {
        let ours = engine.classify(p, &NoSets).unwrap().rule_id;
        if ours != k {
            differ.push(format!("{name}: {p}: kernel rule {k}, parapet rule {ours}"));
        }
    }
    let distinct: std::collections::BTreeSet<u32> = kernel.iter().copied().collect();
    assert!(
        distinct.len() >= min_rules,
        "{name}: the kernel decided only {distinct:?}"
    );
    assert!(
        differ.is_empty(),
        "{} of {} differ:\n{}",
        differ.len(),
        packets.len(),
        differ.join("\n")
    );
}

/// IPv6 packets of protocol 253 from ::1 to ::1 for the routing header
/// oracles: one without a routing header, then one with each combination
/// of routing type (0, 2, 4), segments left (0, 1, 2, 5, 6) and header
/// length (in 8-byte units beyond the first 8) of `hdrlens`.
pub fn routing_header_packets(hdrlens: &[u8]) -> Vec<Packet> {
    let base: Packet = "253 ::1 > ::1".parse().unwrap();
    let mut out = vec![Packet {
        len: 48,
        ..base.clone()
    }];
    for rt_type in [0u8, 2, 4] {
        for segments_left in [0u8, 1, 2, 5, 6] {
            for &hdrlen in hdrlens {
                let mut p = base.clone();
                p.rt = key_value(Some(RoutingHeader {
                    rt_type,
                    segments_left,
                    hdrlen,
                })) as u32;
                p.len = 40 + (hdrlen as u32 + 1) * 8 + 8;
                out.push(p);
            }
        }
    }
    out
}

/// An IPv6 packet from ::1 to ::1 whose payload is `ext` after a routing
/// header next header (43): a routing header the packet cuts short.
pub fn truncated_routing_header(ext: &[u8]) -> Vec<u8> {
    let mut h = vec![0u8; 40];
    h[0] = 0x60;
    h[4..6].copy_from_slice(&(ext.len() as u16).to_be_bytes());
    h[6] = 43;
    h[7] = 64;
    h[23] = 1;
    h[39] = 1;
    h.extend_from_slice(ext);
    h
}

/// The packet-type oracles' veth pair (`pkttype_oracle.rs`, parapet-cli's
/// `netfilter_oracle_pkttype.rs`), IPv6 off: the receiver has a second
/// address, 10.251.0.2/24, with its subnet's broadcast address.
pub fn broadcast_pair(tag: &str) -> Pair {
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

/// The sender's address on [`broadcast_pair`].
pub const PAIR_SRC: Ipv4Addr = Ipv4Addr::new(10, 250, 0, 1);
/// The receiver's first address on [`broadcast_pair`].
pub const PAIR_LOCAL: Ipv4Addr = Ipv4Addr::new(10, 250, 0, 2);
/// The broadcast address of the receiver's second subnet.
pub const PAIR_BCAST: Ipv4Addr = Ipv4Addr::new(10, 251, 0, 255);

/// The packet-type oracles' probes on [`broadcast_pair`]: (destination
/// MAC, its packet type, destination address) for the receiver's MAC, the
/// broadcast MAC and a multicast MAC, each to [`PAIR_LOCAL`],
/// [`PAIR_BCAST`], 255.255.255.255 and 224.0.0.1, in that order.
pub fn broadcast_pair_probes() -> Vec<([u8; 6], u8, Ipv4Addr)> {
    let macs = [
        (Veth::default().b_mac, pkt_type::HOST),
        ([0xff; 6], pkt_type::BROADCAST),
        ([0x01, 0x00, 0x5e, 0x00, 0x00, 0x01], pkt_type::MULTICAST),
    ];
    let dsts = [
        PAIR_LOCAL,
        PAIR_BCAST,
        Ipv4Addr::BROADCAST,
        Ipv4Addr::new(224, 0, 0, 1),
    ];
    macs.iter()
        .flat_map(|&(m, t)| dsts.iter().map(move |&d| (m, t, d)))
        .collect()
}

/// The rule that counted each of `frames` (destination MAC, packet), sent
/// as Ethernet frames by [`send_frame`] out of `dev` from `src_mac` in
/// `sender`, by [`polled_decisions`] (a counter may take up to 10 s to
/// move); `before_each(i)` runs before frame i leaves.
pub fn frame_decisions(
    sender: &Netns,
    (dev, src_mac): (&str, [u8; 6]),
    frames: &[([u8; 6], Packet)],
    counters: impl Fn() -> Vec<u64>,
    mut before_each: impl FnMut(usize),
) -> Vec<u32> {
    polled_decisions(frames, counters, |i, (dst_mac, p)| {
        before_each(i);
        sender.run_in(|| send_frame(dev, *dst_mac, src_mac, p));
        ((), Duration::from_secs(10))
    })
    .into_iter()
    .map(|(_, rule)| rule)
    .collect()
}

/// Two routing headers a packet cuts short (`rt_kernel.rs`, parapet-cli's
/// `netfilter_oracle_rt.rs`): two bytes of one, and a type 0 header with
/// 3 segments left that says 24 bytes but has 8. ip6t_rt hot-drops both;
/// nft reads the bytes it needs.
pub fn truncated_routing_headers() -> [Vec<u8>; 2] {
    [
        truncated_routing_header(&[253, 0]),
        truncated_routing_header(&[253, 2, 0, 3, 0, 0, 0, 0]),
    ]
}

/// The mark oracles' round trip: each `(file name, text, chain)` — an
/// iptables-save file read with its OUTPUT as `filter/OUTPUT`, or an nft
/// file — listed as iptables-save (iptables files only) and as nft, read
/// back, and `outcome` of the listing's chain equal to the file's.
pub fn listings_keep<T: PartialEq + std::fmt::Debug>(
    cases: &[(&str, &str, &str)],
    outcome: &dyn Fn(&parapet_model::Ruleset, &str) -> T,
) {
    for &(name, text, chain) in cases {
        let rs = parse(text, name, Format::Auto).unwrap().ruleset;
        let want = outcome(&rs, chain);
        for syntax in ["iptables", "nft"] {
            let listing = match syntax {
                "iptables" if name.ends_with(".nft") => continue,
                "iptables" => render::iptables_save(&rs),
                _ => render::nft(&rs),
            }
            .unwrap_or_else(|e| panic!("{name} as {syntax}: {e}"));
            let again = parse(&listing, name, Format::Auto)
                .unwrap_or_else(|e| panic!("{name} as {syntax}: {e:?}\n{listing}"))
                .ruleset;
            assert_eq!(
                outcome(&again, chain),
                want,
                "{name} as {syntax}:\n{listing}"
            );
        }
    }
}

/// The option oracles' iptables-save rules (`tcp_option_kernel.rs`,
/// parapet-cli's `netfilter_oracle_tcpopt.rs`), for the family's tool.
/// Rule 1: MSS (2); 2: kind 30; 3: 7 present and 8 absent (two -m tcp);
/// 4: no NOP; 5: kind 77; 6: the rest of the probes.
pub fn tcp_option_rules(family: Family) -> String {
    let rules = "*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A OUTPUT -p tcp -m tcp --sport 40000 --tcp-option 2 -j ACCEPT
-A OUTPUT -p tcp -m tcp --sport 40000 --tcp-option 30 -j ACCEPT
-A OUTPUT -p tcp -m tcp --sport 40000 --tcp-option 7 -m tcp ! --tcp-option 8 -j ACCEPT
-A OUTPUT -p tcp -m tcp --sport 40000 ! --tcp-option 1 -j ACCEPT
-A OUTPUT -p tcp -m tcp --sport 40000 --tcp-option 77 -j ACCEPT
-A OUTPUT -p tcp -m tcp --sport 40000 -j ACCEPT
COMMIT
";
    match family {
        Family::V4 => rules.to_string(),
        Family::V6 => format!("# Generated by ip6tables-save\n{rules}"),
    }
}

/// The TCP option areas the option oracles probe (`tcp_option_kernel.rs`,
/// parapet-cli's `netfilter_oracle_tcpopt.rs`): (area, where nft's walk
/// answers otherwise).
pub fn tcp_option_areas() -> Vec<(Vec<u8>, bool)> {
    let mut last_kind = vec![1u8; 39];
    last_kind.push(2);
    vec![
        (vec![], false),
        // MSS 1460, NOP, NOP, SACK permitted
        (vec![2, 4, 5, 0xb4, 1, 1, 4, 2], false),
        // NOP, NOP, timestamps
        (vec![1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0], false),
        // a kind after End of Option List is found (in the last byte,
        // which nft never reads)
        (vec![0, 0, 0, 7], true),
        (vec![7, 2, 8, 2], false),
        // a length of 0 moves one byte on: the 0 is End of List, then 2
        (vec![5, 0, 2, 0], false),
        // a length of 1: the length byte is read as the next kind (NOP)
        (vec![9, 1, 2, 0], false),
        // window scale's value byte 30 is not a kind
        (vec![3, 3, 30, 0], false),
        // a length past the area ends the walk: 2 is not found (nor by
        // nft, which misses option 6 as well)
        (vec![6, 200, 2, 1], false),
        // kind 30 running past the area: xt finds it, nft does not
        (vec![1, 1, 30, 9], true),
        (vec![77, 2, 1, 1], false),
        // option 77 running past the area: xt finds it, nft does not
        (vec![1, 77, 4, 0], true),
        // a kind in the last byte: xt finds it, nft never reads it
        (last_kind, true),
        (vec![0, 0, 0, 30], true),
    ]
}

/// One TCP packet per [`tcp_option_areas`] entry, from and to the
/// family's loopback address (port 40000 to 9999), carrying the area.
pub fn tcp_option_packets(family: Family) -> Vec<Packet> {
    let lo = match family {
        Family::V4 => 0x7f00_0001,
        Family::V6 => 1,
    };
    tcp_option_areas()
        .into_iter()
        .map(|(area, _)| {
            let mut p = Packet::new(family, lo, lo, 6, 40000, 9999);
            p.tcp_options = (!area.is_empty()).then(|| area.into_boxed_slice());
            p
        })
        .collect()
}

/// The probe as raw bytes from the IP header on: a TCP segment whose data
/// offset covers `p.tcp_options` (or, with `doff`, says that many words).
pub fn tcp_segment(p: &Packet, doff: Option<u8>) -> Vec<u8> {
    let opts = p.tcp_options.as_deref().unwrap_or(&[]);
    let mut tcp = Vec::new();
    tcp.extend(p.sport.to_be_bytes());
    tcp.extend(p.dport.to_be_bytes());
    tcp.extend([0, 0, 0, 1, 0, 0, 0, 0]);
    tcp.push(doff.unwrap_or(5 + opts.len() as u8 / 4) << 4);
    tcp.push(p.tcp_flags);
    tcp.extend([0xff, 0xff, 0, 0, 0, 0]);
    tcp.extend(opts);
    let mut ip = match p.family {
        Family::V4 => {
            let mut h = vec![0x45, 0, 0, 0, 0, 1, 0, 0, 64, 6, 0, 0];
            h.extend((p.src as u32).to_be_bytes());
            h.extend((p.dst as u32).to_be_bytes());
            h[2..4].copy_from_slice(&(20 + tcp.len() as u16).to_be_bytes());
            let c = checksum(&h);
            h[10..12].copy_from_slice(&c.to_be_bytes());
            h
        }
        Family::V6 => {
            let mut h = vec![0x60, 0, 0, 0, 0, 0, 6, 64];
            h[4..6].copy_from_slice(&(tcp.len() as u16).to_be_bytes());
            h.extend(p.src.to_be_bytes());
            h.extend(p.dst.to_be_bytes());
            h
        }
    };
    ip.extend(tcp);
    ip
}
