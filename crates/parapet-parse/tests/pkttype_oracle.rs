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

#[path = "common/raw_out.rs"]
mod raw_out;

use parapet_model::{Family, Packet};
use parapet_testbed::{require_root, Netns, Pair, Veth};
use raw_out::{
    agree, broadcast_pair as pair, broadcast_pair_probes, frame_decisions, legacy_counters,
    load_legacy, load_nft, nft_counters, PAIR_BCAST, PAIR_LOCAL, PAIR_SRC,
};
use std::net::Ipv4Addr;

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

/// A second address of the receiver, with a broadcast address.
const LOCAL2: Ipv4Addr = Ipv4Addr::new(10, 251, 0, 2);

/// (destination MAC, packet) for every MAC kind and destination.
fn probes() -> Vec<([u8; 6], Packet)> {
    let local = [u32::from(PAIR_LOCAL) as u128, u32::from(LOCAL2) as u128];
    broadcast_pair_probes()
        .into_iter()
        .map(|(mac, t, d)| {
            let mut p = Packet::v4(u32::from(PAIR_SRC), u32::from(d), 253, 0, 0);
            p.len = 60;
            p.pkt_type = Some(t);
            p.set_host_addrs(&local, &[u32::from(PAIR_BCAST) as u128]);
            (mac, p)
        })
        .collect()
}

/// Sends each probe from a to b and reads which of b's counters moved;
/// `counts` lists the counters in rule order. The frames cross a veth to
/// the other namespace's backlog: wait until a counter moves (bounded).
fn decisions(pair: &Pair, counts: &dyn Fn(&Netns) -> Vec<u64>) -> Vec<u32> {
    let v = Veth::default();
    frame_decisions(
        &pair.a,
        (v.a_dev, v.a_mac),
        &probes(),
        || counts(&pair.b),
        |_| (),
    )
}

/// The probes' packets, in order.
fn packets() -> Vec<Packet> {
    probes().into_iter().map(|(_, p)| p).collect()
}

#[test]
#[ignore = "needs root"]
fn pkttype_agrees_with_iptables_legacy() {
    require_root();
    let pair = pair("p13-pkt-ipt");
    load_legacy(&pair.b, IPT, Family::V4);
    let counts = |ns: &Netns| legacy_counters(ns, Family::V4, "INPUT");
    let kernel = decisions(&pair, &counts);
    agree(IPT, "pkttype.v4", "filter/INPUT", &packets(), &kernel, 6);
}

#[test]
#[ignore = "needs root"]
fn pkttype_agrees_with_nft() {
    require_root();
    let pair = pair("p13-pkt-nft");
    load_nft(&pair.b, NFT);
    let counts = |ns: &Netns| nft_counters(ns, "ip", "t", "input");
    let kernel = decisions(&pair, &counts);
    agree(NFT, "pkttype.nft", "t/input", &packets(), &kernel, 6);
}
