//! Address types (`-m addrtype`, nft `fib daddr type`) in the dataplane
//! against the kernel: namespace pairs of a sender and a receiver that
//! routes; the receiver enforces one ruleset with iptables-legacy, with
//! nft (parapet's listing, a counter on every rule), with parapetd at the
//! netfilter hooks and with parapetd in the tc placement (both typing
//! addresses by the mirror of the receiver's `local` table). The sender
//! writes IPv4 packets of protocol 253 to the receiver's address, to a
//! subnet's broadcast address, to 255.255.255.255, to 224.0.0.1 and to an
//! address the receiver forwards; then the receiver gets that address
//! (`ip addr add`, no apply) and one more packet to it must be LOCAL at
//! INPUT — the mirror follows the host. The rule that counted each probe
//! is compared probe by probe, and with the linear engine given each
//! probe's address type. Needs root.

mod common;
#[path = "../../parapet-parse/tests/common/raw_out.rs"]
mod raw_out;

use common::daemon::{ok, parapet, stat_counters, stats};
use common::nf_twins::{load, nft_counters, nft_of, with_counters};
use common::router::start_daemon_with;
use parapet_model::{addr_type, from_ip, Family, LinearEngine, NoSets, Packet};
use parapet_parse::{parse, Format};
use parapet_testbed::{require_root, Netns, Pair, Veth};
use raw_out::send_frame;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

/// Each probe meets a rule of its own type: a wrong type moves it to
/// another rule. Rules 1..=6 at INPUT, 7..=9 at FORWARD.
const IPT: &str = "*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -p 253 -d 255.255.255.255 -m addrtype --dst-type BROADCAST -j ACCEPT
-A INPUT -p 253 -m addrtype --dst-type BROADCAST -j ACCEPT
-A INPUT -p 253 -m addrtype --dst-type MULTICAST -j ACCEPT
-A INPUT -p 253 -m addrtype --dst-type LOCAL -j ACCEPT
-A INPUT -p 253 -m addrtype --src-type UNICAST -j ACCEPT
-A INPUT -p 253 -j ACCEPT
-A FORWARD -p 253 -m addrtype --dst-type LOCAL -j ACCEPT
-A FORWARD -p 253 -m addrtype --dst-type UNICAST --src-type UNICAST -j ACCEPT
-A FORWARD -p 253 -j ACCEPT
COMMIT
";

const SRC: Ipv4Addr = Ipv4Addr::new(10, 250, 0, 1);
const LOCAL: Ipv4Addr = Ipv4Addr::new(10, 250, 0, 2);
const BCAST: Ipv4Addr = Ipv4Addr::new(10, 251, 0, 255);
/// Routed back to the sender by the receiver, then made one of its
/// addresses.
const ROUTED: Ipv4Addr = Ipv4Addr::new(10, 252, 0, 9);
const RULES: u32 = 9;

/// The expected rule of each probe (the kernel must agree: checked); the
/// last is the one after `ip addr add`.
const EXPECTED: [u32; 6] = [4, 2, 1, 3, 8, 4];

fn pair(tag: &str) -> Pair {
    let v = Veth {
        prefix_len: 24,
        disable_ipv6: true,
        ..Veth::default()
    };
    let pair = Pair::create(tag, &v).unwrap();
    let b = &pair.b;
    b.ip(&["addr", "add", "10.251.0.2/24", "brd", "+", "dev", v.b_dev])
        .unwrap();
    // forwarded back to the sender (a veth has no other side to route to)
    b.ip(&["route", "add", "10.252.0.0/24", "via", "10.250.0.1"])
        .unwrap();
    b.exec(&["sysctl", "-qw", "net.ipv4.ip_forward=1"]).unwrap();
    pair
}

/// (destination, destination MAC, the kernel's type of the destination)
/// of every probe, in the order of [`EXPECTED`].
fn probes() -> Vec<(Ipv4Addr, [u8; 6], u8)> {
    let host = Veth::default().b_mac;
    vec![
        (LOCAL, host, addr_type::LOCAL),
        (BCAST, [0xff; 6], addr_type::BROADCAST),
        (Ipv4Addr::BROADCAST, [0xff; 6], addr_type::BROADCAST),
        (
            Ipv4Addr::new(224, 0, 0, 1),
            [0x01, 0x00, 0x5e, 0x00, 0x00, 0x01],
            addr_type::MULTICAST,
        ),
        (ROUTED, host, addr_type::UNICAST),
        (ROUTED, host, addr_type::LOCAL),
    ]
}

/// The IPv4 packet of protocol 253 (60 bytes, TTL 64) from the sender to
/// `dst`, as the linear engine sees it with destination type `ty`.
fn packet(dst: Ipv4Addr, ty: u8) -> Packet {
    let addr = |a: Ipv4Addr| from_ip(a.into()).1;
    let mut p = Packet::new(Family::V4, addr(SRC), addr(dst), 253, 0, 0);
    p.len = 60;
    p.ttl = 64;
    p.src_type = Some(addr_type::UNICAST);
    p.dst_type = Some(ty);
    p
}

/// Sends every probe and reads which of the receiver's rules counted it
/// (`counts`: packets per rule 1..=RULES; 0: none moved within 10 s).
/// Before the last probe the receiver gets [`ROUTED`] as an address, and
/// `settled` waits for whatever must see it.
fn decisions(pair: &Pair, counts: &dyn Fn() -> Vec<u64>, settled: &dyn Fn()) -> Vec<u32> {
    let dev = Veth::default().a_dev;
    let mut before = counts();
    let all = probes();
    all.iter()
        .enumerate()
        .map(|(i, &(dst, mac, ty))| {
            if i + 1 == all.len() {
                pair.b
                    .ip(&["addr", "add", "10.252.0.9/32", "dev", Veth::default().b_dev])
                    .unwrap();
                settled();
            }
            let p = packet(dst, ty);
            pair.a
                .run_in(|| send_frame(dev, mac, Veth::default().a_mac, &p));
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                let after = counts();
                let moved = after.iter().zip(&before).position(|(a, b)| a > b);
                if moved.is_some() || Instant::now() > deadline {
                    before = after;
                    return moved.map_or(0, |i| i as u32 + 1);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        })
        .collect()
}

fn legacy_counts(ns: &Netns) -> Vec<u64> {
    ["INPUT", "FORWARD"]
        .iter()
        .flat_map(|chain| {
            let out = ns
                .exec(&["iptables-legacy", "-L", chain, "-v", "-x", "-n"])
                .unwrap();
            out.lines()
                .skip(2)
                .map(|l| l.split_whitespace().next().unwrap().parse().unwrap())
                .collect::<Vec<u64>>()
        })
        .collect()
}

fn legacy_twin() -> Vec<u32> {
    let pair = pair("p13-at-ipt");
    load(&pair.b, &["iptables-legacy-restore"], IPT);
    decisions(&pair, &|| legacy_counts(&pair.b), &|| {})
}

fn nft_twin() -> Vec<u32> {
    let pair = pair("p13-at-nft");
    let nft = nft_of(IPT, false);
    assert!(nft.contains("fib daddr type local"), "{nft}");
    load(&pair.b, &["nft", "-f", "-"], &with_counters(&nft));
    let ids: Vec<u32> = (1..=RULES).collect();
    let counts = || -> Vec<u64> {
        let m = nft_counters(&pair.b, false, &ids);
        ids.iter().map(|i| m.get(i).copied().unwrap_or(0)).collect()
    };
    decisions(&pair, &counts, &|| {})
}

/// The number of times parapetd's address mirror was filled.
fn mirror_refreshes(sock: &std::path::Path) -> u64 {
    stats(sock)["dataplane"]["addr_mirror"]["refreshes"]
        .as_u64()
        .unwrap_or(0)
}

/// parapetd in the receiver, started with `flags`, the ruleset applied and
/// attached without an interface (at the netfilter hooks, or at tc in the
/// tc placement).
fn parapetd_twin(tag: &str, flags: &[&str]) -> Vec<u32> {
    let pair = pair(tag);
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("sock");
    let file = dir.path().join("rules.v4");
    std::fs::write(&file, IPT).unwrap();
    let _daemon = start_daemon_with(&pair.b, dir.path(), &sock, flags);
    ok(&sock, &["apply", file.to_str().unwrap()]);
    let o = parapet(&sock, &["attach"]);
    assert!(
        o.status.success(),
        "attach: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let s = stats(&sock);
    assert!(
        s["dataplane"]["addr_mirror"]["routes"]
            .as_u64()
            .unwrap_or(0)
            >= 4,
        "the mirror holds the receiver's local and broadcast routes: {}",
        s["dataplane"]["addr_mirror"]
    );
    let counts = || -> Vec<u64> {
        let c = stat_counters(&stats(&sock));
        (1..=RULES)
            .map(|r| c.get(&r).copied().unwrap_or(0))
            .collect()
    };
    let was = std::cell::Cell::new(0);
    let settled = || {
        // the address watcher refreshes once per burst of events: wait
        // for a refresh after the add (bounded), never for a fixed time
        let deadline = Instant::now() + Duration::from_secs(10);
        while mirror_refreshes(&sock) <= was.get() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    // no address or route event happens before the add: a refresh
    // counted from here is the add's
    was.set(mirror_refreshes(&sock));
    decisions(&pair, &counts, &settled)
}

/// The linear engine's rule for each probe, given its address types (the
/// forwarded ones at FORWARD, the others at INPUT).
fn linear() -> Vec<u32> {
    let rs = parse(IPT, "addrtype.ipt", Format::IptablesSave)
        .unwrap()
        .ruleset;
    let input = LinearEngine::new(&rs, rs.select_chain(Some("INPUT")).unwrap()).unwrap();
    let forward = LinearEngine::new(&rs, rs.select_chain(Some("FORWARD")).unwrap()).unwrap();
    probes()
        .iter()
        .map(|&(dst, _, ty)| {
            let e = if ty == addr_type::UNICAST {
                &forward
            } else {
                &input
            };
            e.classify(&packet(dst, ty), &NoSets).unwrap().rule_id
        })
        .collect()
}

fn differences(name: &str, kernel: &[u32], ours: &[u32]) -> Vec<String> {
    probes()
        .iter()
        .zip(kernel.iter().zip(ours))
        .filter(|(_, (k, o))| k != o)
        .map(|((dst, _, ty), (k, o))| {
            format!("to {dst} (type {ty}): kernel rule {k}, {name} rule {o}")
        })
        .collect()
}

#[test]
#[ignore = "needs root"]
fn addrtype_at_the_netfilter_hooks_and_tc_as_the_kernel() {
    require_root();
    let kernel = legacy_twin();
    assert_eq!(kernel, EXPECTED, "the kernel twin");
    let mut differ = differences("linear engine", &kernel, &linear());
    differ.extend(differences("nft", &kernel, &nft_twin()));
    differ.extend(differences(
        "parapetd (netfilter)",
        &kernel,
        &parapetd_twin("p13-at-nf", &[]),
    ));
    differ.extend(differences(
        "parapetd (tc placement)",
        &kernel,
        &parapetd_twin("p13-at-tc", &["--hook-placement", "tc"]),
    ));
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}
