//! The kernel as the oracle for address types (`-m addrtype`, nft `fib
//! saddr|daddr type`): the same rules are loaded into iptables-legacy,
//! ip6tables-legacy and nft in a network namespace this test creates, with
//! an interface holding 10.9.0.1/24 (so 10.9.0.255 is a broadcast
//! address) and 2001:db8:9::1/64. Raw packets of protocol 253 with every
//! combination of local, broadcast, multicast and unicast source and
//! destination addresses leave through OUTPUT, and the rule whose kernel
//! counter moved is compared with the linear engine's decision, packet by
//! packet, the packets' types given as `--local-addr` gives them (the
//! host's addresses LOCAL, its subnet's broadcast address BROADCAST, the
//! rest by prefix).

#[path = "common/raw_out.rs"]
mod raw_out;

use parapet_model::{Family, Packet};
use parapet_testbed::{require_root, Netns};
use raw_out::{agree, iptables_decisions, nft_decisions, Sender};
use std::net::IpAddr;

const V4: &str = "*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A OUTPUT -p 253 -m addrtype --src-type LOCAL --dst-type LOCAL -j ACCEPT
-A OUTPUT -p 253 -m addrtype --dst-type BROADCAST -j ACCEPT
-A OUTPUT -p 253 -m addrtype --src-type UNICAST --dst-type MULTICAST -j ACCEPT
-A OUTPUT -p 253 -m addrtype --dst-type LOCAL -j ACCEPT
-A OUTPUT -p 253 -m addrtype --src-type LOCAL,BROADCAST ! --dst-type UNICAST -j ACCEPT
-A OUTPUT -p 253 -m addrtype ! --src-type LOCAL -j ACCEPT
-A OUTPUT -p 253 -m addrtype --dst-type UNICAST -j ACCEPT
COMMIT
";

/// ip6tables' lists are conjunctions (`match_type6`): rule 4 is LOCAL.
const V6: &str = "*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A OUTPUT -p 253 -m addrtype --src-type LOCAL --dst-type LOCAL -j ACCEPT
-A OUTPUT -p 253 -m addrtype --dst-type MULTICAST -j ACCEPT
-A OUTPUT -p 253 -m addrtype --dst-type UNICAST,MULTICAST -j ACCEPT
-A OUTPUT -p 253 -m addrtype --dst-type UNICAST,LOCAL -j ACCEPT
-A OUTPUT -p 253 -m addrtype ! --src-type LOCAL -j ACCEPT
-A OUTPUT -p 253 -m addrtype --dst-type UNICAST -j ACCEPT
COMMIT
";

const NFT: &str = "table inet t {
\tchain output {
\t\ttype filter hook output priority 0; policy accept;
\t\tmeta l4proto 253 fib saddr type local fib daddr type local counter accept
\t\tmeta l4proto 253 fib daddr type broadcast counter accept
\t\tmeta l4proto 253 fib daddr type multicast fib saddr type unicast counter accept
\t\tmeta l4proto 253 meta nfproto ipv6 fib daddr type { local, multicast } counter accept
\t\tmeta l4proto 253 fib saddr type != local counter accept
\t\tmeta l4proto 253 fib saddr type { broadcast, local } fib daddr type != unicast counter accept
\t\tmeta l4proto 253 fib daddr type unicast counter accept
\t}
}
";

/// The interface's addresses; loopback's (127.0.0.0/8, ::1) are LOCAL by
/// prefix.
const LOCAL4: [&str; 1] = ["10.9.0.1"];
const BCAST4: &str = "10.9.0.255";
const LOCAL6: [&str; 1] = ["2001:db8:9::1"];

/// The test host: an interface (one end of a veth pair) with an IPv4 /24 and an IPv6 /64,
/// default routes through it (so any unicast address has a route).
fn host(tag: &str) -> Netns {
    let ns = Netns::create(tag).unwrap();
    for args in [
        &["link", "add", "d0", "type", "veth", "peer", "name", "d1"][..],
        &["addr", "add", "10.9.0.1/24", "brd", "+", "dev", "d0"],
        &[
            "-6",
            "addr",
            "add",
            "2001:db8:9::1/64",
            "dev",
            "d0",
            "nodad",
        ],
        &["link", "set", "d0", "up"],
        &["link", "set", "d1", "up"],
        &["route", "add", "default", "dev", "d0"],
        &["-6", "route", "add", "default", "dev", "d0"],
    ] {
        ns.ip(args).unwrap();
    }
    ns.wait_local_route("2001:db8:9::1").unwrap();
    ns
}

fn addr(s: &str) -> u128 {
    match s.parse::<IpAddr>().unwrap() {
        IpAddr::V4(a) => u32::from(a) as u128,
        IpAddr::V6(a) => u128::from(a),
    }
}

/// Every pair of the family's source and destination addresses, typed as
/// the host's tables type them.
fn packets(family: Family) -> Vec<Packet> {
    let (srcs, dsts, local, bcast): (&[&str], &[&str], &[&str], &[&str]) = match family {
        Family::V4 => (
            &["127.0.0.1", "10.9.0.1", "10.9.0.255", "192.0.2.7"],
            &[
                "127.0.0.1",
                "10.9.0.1",
                "10.9.0.255",
                "255.255.255.255",
                "224.0.0.1",
                "10.9.0.7",
                "192.0.2.9",
            ],
            &LOCAL4,
            &[BCAST4],
        ),
        Family::V6 => (
            &["::1", "2001:db8:9::1", "2001:db8:9::7", "2001:db8:ff::5"],
            &[
                "::1",
                "2001:db8:9::1",
                "ff02::1",
                "2001:db8:9::7",
                "2001:db8:ff::9",
            ],
            &LOCAL6,
            &[],
        ),
    };
    let local: Vec<u128> = local.iter().map(|a| addr(a)).collect();
    let bcast: Vec<u128> = bcast.iter().map(|a| addr(a)).collect();
    let mut out = Vec::new();
    for s in srcs {
        for d in dsts {
            let mut p = Packet::new(family, addr(s), addr(d), 253, 0, 0);
            p.len = 60;
            p.set_host_addrs(&local, &bcast);
            out.push(p);
        }
    }
    out
}

/// Each packet to its own destination, multicast and limited broadcast
/// out of the interface.
const SENDER: Sender = Sender::Destination { group_dev: "d0" };

#[test]
#[ignore = "needs root"]
fn addrtype_agrees_with_iptables_legacy() {
    require_root();
    let ns = host("p13-at-ipt");
    let v4 = packets(Family::V4);
    let kernel = iptables_decisions(&ns, V4, Family::V4, &v4, SENDER);
    agree(V4, "addrtype.v4", "filter/OUTPUT", &v4, &kernel, 7);
    let v6 = packets(Family::V6);
    let kernel = iptables_decisions(&ns, V6, Family::V6, &v6, SENDER);
    let v6_rules = format!("# Generated by ip6tables-save\n{V6}");
    agree(&v6_rules, "addrtype.v6", "filter/OUTPUT", &v6, &kernel, 4);
}

#[test]
#[ignore = "needs root"]
fn fib_type_agrees_with_nft() {
    require_root();
    let ns = host("p13-at-nft");
    let mut all = packets(Family::V4);
    all.extend(packets(Family::V6));
    let kernel = nft_decisions(&ns, NFT, &all, SENDER);
    agree(NFT, "addrtype.nft", "t/output", &all, &kernel, 6);
}
