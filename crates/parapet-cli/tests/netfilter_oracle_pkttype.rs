//! The link-layer packet type (`-m pkttype`, nft `meta pkttype`) in the
//! dataplane against the kernel: namespace pairs of a sender and a
//! receiver; the receiver enforces one ruleset with iptables-legacy, with
//! nft (parapet's listing, a counter on every rule), with parapetd at the
//! netfilter hooks (`skb->pkt_type` read by the netfilter program) and with
//! parapetd in the tc placement (`skb->pkt_type` at tc ingress). The sender
//! writes Ethernet frames (AF_PACKET) to the receiver's MAC, to the
//! broadcast MAC and to a multicast MAC, carrying IPv4 packets of protocol
//! 253 to the receiver's address, to a subnet's broadcast address, to
//! 255.255.255.255 and to 224.0.0.1; the rule that counted each is compared
//! probe by probe, and with the linear engine given the probe's packet
//! type. (A frame to another host's MAC, `otherhost`, is dropped by the IP
//! layer before any netfilter hook: not sent.) Needs root.

mod common;
#[path = "../../parapet-parse/tests/common/raw_out.rs"]
mod raw_out;

use common::nf_twins::{assert_rules_agree, load, nft_of, nft_rule_counts, with_counters};
use common::router::{applied_and_attached, rule_counts};
use parapet_model::{from_ip, Family, LinearEngine, NoSets, Packet};
use parapet_parse::{parse, Format};
use parapet_testbed::{require_root, Pair, Veth};
use raw_out::{
    broadcast_pair as pair, broadcast_pair_probes, frame_decisions, legacy_counters, PAIR_SRC,
};
use std::net::Ipv4Addr;

/// Every probe meets a rule of its own kind: the packet type with the
/// destination, so a wrong type moves the probe to another rule.
const IPT: &str = "*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -p 253 -d 10.251.0.255 -m pkttype --pkt-type broadcast -j ACCEPT
-A INPUT -p 253 -d 224.0.0.0/4 -m pkttype --pkt-type multicast -j ACCEPT
-A INPUT -p 253 -d 224.0.0.0/4 -m pkttype --pkt-type unicast -j ACCEPT
-A INPUT -p 253 -d 255.255.255.255 -m pkttype --pkt-type unicast -j ACCEPT
-A INPUT -p 253 -m pkttype --pkt-type multicast -j ACCEPT
-A INPUT -p 253 -m pkttype ! --pkt-type unicast -j ACCEPT
-A INPUT -p 253 -m pkttype --pkt-type unicast -j ACCEPT
-A INPUT -p 253 -j ACCEPT
COMMIT
";

const RULES: u32 = 8;

/// The expected rule of each probe (the kernel must agree: checked).
const EXPECTED: [u32; 12] = [7, 7, 4, 3, 6, 1, 6, 6, 5, 5, 5, 2];

/// (destination MAC, its packet type, destination address) of every
/// probe, in the order of [`EXPECTED`].
fn probes() -> Vec<([u8; 6], u8, Ipv4Addr)> {
    broadcast_pair_probes()
}

/// The IPv4 packet of protocol 253 (60 bytes, TTL 64) from the sender to
/// `dst`, as the linear engine sees it with packet type `ty`.
fn packet(dst: Ipv4Addr, ty: u8) -> Packet {
    let addr = |a: Ipv4Addr| from_ip(a.into()).1;
    let mut p = Packet::new(Family::V4, addr(PAIR_SRC), addr(dst), 253, 0, 0);
    p.len = 60;
    p.ttl = 64;
    p.pkt_type = Some(ty);
    p
}

/// Sends every probe and reads which of the receiver's rules counted it
/// (`counts`: packets per rule 1..=RULES; 0: none moved within 10 s).
fn decisions(pair: &Pair, counts: impl Fn() -> Vec<u64>) -> Vec<u32> {
    let v = Veth::default();
    let frames: Vec<([u8; 6], Packet)> = probes()
        .iter()
        .map(|&(mac, ty, dst)| (mac, packet(dst, ty)))
        .collect();
    frame_decisions(&pair.a, (v.a_dev, v.a_mac), &frames, counts, |_| ())
}

fn legacy_twin() -> Vec<u32> {
    let pair = pair("p13-pt-ipt");
    load(&pair.b, &["iptables-legacy-restore"], IPT);
    decisions(&pair, || legacy_counters(&pair.b, Family::V4, "INPUT"))
}

fn nft_twin() -> Vec<u32> {
    let pair = pair("p13-pt-nft");
    let nft = nft_of(IPT, false);
    assert!(nft.contains("meta pkttype != host"), "{nft}");
    load(&pair.b, &["nft", "-f", "-"], &with_counters(&nft));
    decisions(&pair, || nft_rule_counts(&pair.b, false, RULES))
}

/// parapetd in the receiver, started with `flags`, the ruleset applied and
/// attached without an interface (at the netfilter hooks, or at tc in the
/// tc placement).
fn parapetd_twin(tag: &str, flags: &[&str]) -> Vec<u32> {
    let pair = pair(tag);
    let d = applied_and_attached(&pair.b, IPT, None, flags);
    decisions(&pair, || rule_counts(&d.sock, RULES))
}

/// The linear engine's rule for each probe, given its packet type.
fn linear() -> Vec<u32> {
    let rs = parse(IPT, "pkttype.ipt", Format::IptablesSave)
        .unwrap()
        .ruleset;
    let e = LinearEngine::new(&rs, rs.select_chain(Some("INPUT")).unwrap()).unwrap();
    probes()
        .iter()
        .map(|&(_, ty, dst)| e.classify(&packet(dst, ty), &NoSets).unwrap().rule_id)
        .collect()
}

#[test]
#[ignore = "needs root"]
fn pkttype_at_the_netfilter_hooks_and_tc_as_the_kernel() {
    require_root();
    let kernel = legacy_twin();
    assert_eq!(kernel, EXPECTED, "the kernel twin");
    let probes = probes();
    assert_rules_agree(
        &kernel,
        &[
            ("linear engine", linear()),
            ("nft", nft_twin()),
            ("parapetd (netfilter)", parapetd_twin("p13-pt-nf", &[])),
            (
                "parapetd (tc placement)",
                parapetd_twin("p13-pt-tc", &["--hook-placement", "tc"]),
            ),
        ],
        &|i| {
            let (mac, _, dst) = probes[i];
            format!("to {mac:02x?} {dst}")
        },
    );
}
