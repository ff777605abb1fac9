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
//! INPUT — the mirror follows the host. IPv6 the same with the
//! receiver's address, ff02::1 and a forwarded address (there the kernel
//! types by class and a route lookup). The rule that counted each probe
//! is compared probe by probe, and with the linear engine given each
//! probe's address type. Needs root.

mod common;
#[path = "../../parapet-parse/tests/common/raw_out.rs"]
mod raw_out;

use common::daemon::stats;
use common::nf_twins::{assert_rules_agree, load, nft_of, nft_rule_counts, with_counters};
use common::router::{applied_and_attached, rule_counts};
use parapet_model::{addr_type, from_ip, Family, LinearEngine, NoSets, Packet};
use parapet_parse::{parse, Format};
use parapet_testbed::{require_root, Netns, Pair, Veth};
use raw_out::{frame_decisions, legacy_counters};
use std::net::IpAddr;
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

/// The IPv6 ruleset: the kernel types IPv6 addresses by class and a route
/// lookup (`match_type6`); rules 1..=3 at INPUT, 4..=6 at FORWARD.
const IPT6: &str = "*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -p 253 -m addrtype --dst-type MULTICAST -j ACCEPT
-A INPUT -p 253 -m addrtype --src-type UNICAST --dst-type LOCAL -j ACCEPT
-A INPUT -p 253 -j ACCEPT
-A FORWARD -p 253 -m addrtype --dst-type LOCAL -j ACCEPT
-A FORWARD -p 253 -m addrtype ! --dst-type LOCAL -j ACCEPT
-A FORWARD -p 253 -j ACCEPT
COMMIT
";

/// One family's run: its ruleset, probes and the kernel's answers.
struct Fam {
    v6: bool,
    rules: &'static str,
    /// Rules in the file (INPUT's, then FORWARD's).
    n_rules: u32,
    /// The sender's address.
    src: IpAddr,
    /// (destination, destination MAC, the kernel's type of the
    /// destination) of every probe; the last one after the receiver got
    /// [`Fam::added`].
    probes: Vec<(IpAddr, [u8; 6], u8)>,
    /// `ip addr add` arguments of the address the receiver gets before the
    /// last probe (the forwarded destination until then).
    added: [&'static str; 2],
    /// The rule the kernel counts each probe with (checked).
    expected: Vec<u32>,
}

fn v4() -> Fam {
    let host = Veth::default().b_mac;
    let a = |s: &str| s.parse::<IpAddr>().unwrap();
    Fam {
        v6: false,
        rules: IPT,
        n_rules: 9,
        src: a("10.250.0.1"),
        probes: vec![
            (a("10.250.0.2"), host, addr_type::LOCAL),
            (a("10.251.0.255"), [0xff; 6], addr_type::BROADCAST),
            (a("255.255.255.255"), [0xff; 6], addr_type::BROADCAST),
            (a("224.0.0.1"), [1, 0, 0x5e, 0, 0, 1], addr_type::MULTICAST),
            (a("10.252.0.9"), host, addr_type::UNICAST),
            (a("10.252.0.9"), host, addr_type::LOCAL),
        ],
        added: ["10.252.0.9/32", ""],
        expected: vec![4, 2, 1, 3, 8, 4],
    }
}

fn v6() -> Fam {
    let host = Veth::default().b_mac;
    let a = |s: &str| s.parse::<IpAddr>().unwrap();
    Fam {
        v6: true,
        rules: IPT6,
        n_rules: 6,
        src: a("2001:db8:250::1"),
        probes: vec![
            (a("2001:db8:250::2"), host, addr_type::LOCAL),
            (a("ff02::1"), [0x33, 0x33, 0, 0, 0, 1], addr_type::MULTICAST),
            (a("2001:db8:252::9"), host, addr_type::UNICAST),
            (a("2001:db8:252::9"), host, addr_type::LOCAL),
        ],
        added: ["2001:db8:252::9/128", "nodad"],
        expected: vec![2, 1, 5, 2],
    }
}

/// The receiver: a second subnet with its broadcast address (IPv4), a
/// route that forwards 10.252.0.0/24 / 2001:db8:252::/64 back to the
/// sender (a veth has no other side to route to), forwarding on; IPv6 has
/// its addresses without DAD and waits until no address is tentative, so
/// no address event of the link's own comes after the probes start.
fn pair(tag: &str, fam: &Fam) -> Pair {
    let v = Veth {
        prefix_len: 24,
        disable_ipv6: !fam.v6,
        ..Veth::default()
    };
    let pair = Pair::create(tag, &v).unwrap();
    let b = &pair.b;
    if fam.v6 {
        pair.a
            .ip(&[
                "-6",
                "addr",
                "add",
                "2001:db8:250::1/64",
                "dev",
                v.a_dev,
                "nodad",
            ])
            .unwrap();
        b.ip(&[
            "-6",
            "addr",
            "add",
            "2001:db8:250::2/64",
            "dev",
            v.b_dev,
            "nodad",
        ])
        .unwrap();
        let mac = "02:70:70:00:00:01";
        b.ip(&[
            "-6",
            "neigh",
            "replace",
            "2001:db8:250::1",
            "lladdr",
            mac,
            "dev",
            v.b_dev,
        ])
        .unwrap();
        b.ip(&[
            "-6",
            "route",
            "add",
            "2001:db8:252::/64",
            "via",
            "2001:db8:250::1",
        ])
        .unwrap();
        b.exec(&["sysctl", "-qw", "net.ipv6.conf.all.forwarding=1"])
            .unwrap();
        pair.a.wait_ipv6_settled(&["2001:db8:250::1"]).unwrap();
        b.wait_ipv6_settled(&["2001:db8:250::2"]).unwrap();
    } else {
        b.ip(&["addr", "add", "10.251.0.2/24", "brd", "+", "dev", v.b_dev])
            .unwrap();
        b.ip(&["route", "add", "10.252.0.0/24", "via", "10.250.0.1"])
            .unwrap();
        b.exec(&["sysctl", "-qw", "net.ipv4.ip_forward=1"]).unwrap();
    }
    pair
}

/// The protocol-253 packet (60 bytes, hop limit 64) from the sender to
/// `dst`, as the linear engine sees it with destination type `ty`.
fn packet(fam: &Fam, dst: IpAddr, ty: u8) -> Packet {
    let (family, src) = from_ip(fam.src);
    let mut p = Packet::new(family, src, from_ip(dst).1, 253, 0, 0);
    p.len = 60;
    p.ttl = 64;
    p.src_type = Some(addr_type::UNICAST);
    p.dst_type = Some(ty);
    p
}

/// Sends every probe and reads which of the receiver's rules counted it
/// (`counts`: packets per rule 1..=n_rules; 0: none moved within 10 s).
/// Before the last probe `add` gives the receiver [`Fam::added`] (and
/// waits for whatever must see it).
fn decisions(pair: &Pair, fam: &Fam, counts: &dyn Fn() -> Vec<u64>, add: &dyn Fn()) -> Vec<u32> {
    let v = Veth::default();
    let frames: Vec<([u8; 6], Packet)> = fam
        .probes
        .iter()
        .map(|&(dst, mac, ty)| (mac, packet(fam, dst, ty)))
        .collect();
    frame_decisions(&pair.a, (v.a_dev, v.a_mac), &frames, counts, |i| {
        if i + 1 == frames.len() {
            add();
        }
    })
}

/// Gives the receiver the address of [`Fam::added`] and waits (bounded)
/// until its `local` route exists: IPv6 inserts that route from the
/// address's DAD work, after `ip addr add` has returned, and a probe sent
/// before it is still forwarded.
fn add_address(pair: &Pair, fam: &Fam) {
    let mut args = vec!["addr", "add", fam.added[0], "dev", Veth::default().b_dev];
    if !fam.added[1].is_empty() {
        args.push(fam.added[1]);
    }
    pair.b.ip(&args).unwrap();
    let addr = fam.added[0].split('/').next().unwrap();
    pair.b.wait_local_route(addr).unwrap();
}

/// The legacy twin's counters of INPUT's rules, then FORWARD's.
fn legacy_counts(ns: &Netns, v6: bool) -> Vec<u64> {
    let family = if v6 { Family::V6 } else { Family::V4 };
    ["INPUT", "FORWARD"]
        .iter()
        .flat_map(|chain| legacy_counters(ns, family, chain))
        .collect()
}

fn legacy_twin(tag: &str, fam: &Fam) -> Vec<u32> {
    let pair = pair(tag, fam);
    let restore = if fam.v6 {
        "ip6tables-legacy-restore"
    } else {
        "iptables-legacy-restore"
    };
    load(&pair.b, &[restore], fam.rules);
    decisions(&pair, fam, &|| legacy_counts(&pair.b, fam.v6), &|| {
        add_address(&pair, fam)
    })
}

fn nft_twin(tag: &str, fam: &Fam) -> Vec<u32> {
    let pair = pair(tag, fam);
    let nft = nft_of(fam.rules, fam.v6);
    assert!(nft.contains("fib daddr type local"), "{nft}");
    load(&pair.b, &["nft", "-f", "-"], &with_counters(&nft));
    let counts = || nft_rule_counts(&pair.b, fam.v6, fam.n_rules);
    decisions(&pair, fam, &counts, &|| add_address(&pair, fam))
}

/// parapetd's address mirror: (routes held, refreshes).
fn mirror(sock: &std::path::Path) -> (u64, u64) {
    let s = stats(sock);
    let m = &s["dataplane"]["addr_mirror"];
    (
        m["routes"].as_u64().unwrap_or(0),
        m["refreshes"].as_u64().unwrap_or(0),
    )
}

/// parapetd in the receiver, started with `flags`, the ruleset applied and
/// attached without an interface (at the netfilter hooks, or at tc in the
/// tc placement).
fn parapetd_twin(tag: &str, fam: &Fam, flags: &[&str]) -> Vec<u32> {
    let pair = pair(tag, fam);
    let format = if fam.v6 {
        "ip6tables-save"
    } else {
        "iptables-save"
    };
    let d = applied_and_attached(&pair.b, fam.rules, Some(format), flags);
    let sock = &d.sock;
    assert!(
        mirror(sock).0 >= 2,
        "the mirror holds the receiver's local routes: {}",
        stats(sock)["dataplane"]["addr_mirror"]
    );
    let counts = || rule_counts(sock, fam.n_rules);
    let add = || {
        // the address watcher refreshes once per burst of events: wait
        // (bounded) until a refresh after the add holds one more route,
        // never for a fixed time
        let (routes, refreshes) = mirror(sock);
        add_address(&pair, fam);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let (r, n) = mirror(sock);
            if (r > routes && n > refreshes) || Instant::now() > deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    decisions(&pair, fam, &counts, &add)
}

/// The linear engine's rule for each probe, given its address types (the
/// forwarded one at FORWARD, the others at INPUT).
fn linear(fam: &Fam) -> Vec<u32> {
    let format = if fam.v6 {
        Format::Ip6tablesSave
    } else {
        Format::IptablesSave
    };
    let rs = parse(fam.rules, "addrtype.ipt", format).unwrap().ruleset;
    let input = LinearEngine::new(&rs, rs.select_chain(Some("INPUT")).unwrap()).unwrap();
    let forward = LinearEngine::new(&rs, rs.select_chain(Some("FORWARD")).unwrap()).unwrap();
    fam.probes
        .iter()
        .map(|&(dst, _, ty)| {
            let e = if ty == addr_type::UNICAST {
                &forward
            } else {
                &input
            };
            e.classify(&packet(fam, dst, ty), &NoSets).unwrap().rule_id
        })
        .collect()
}

fn agree(fam: &Fam, tag: &str) {
    require_root();
    let kernel = legacy_twin(&format!("{tag}-ipt"), fam);
    assert_eq!(kernel, fam.expected, "the kernel twin");
    assert_rules_agree(
        &kernel,
        &[
            ("linear engine", linear(fam)),
            ("nft", nft_twin(&format!("{tag}-nft"), fam)),
            (
                "parapetd (netfilter)",
                parapetd_twin(&format!("{tag}-nf"), fam, &[]),
            ),
            (
                "parapetd (tc placement)",
                parapetd_twin(&format!("{tag}-tc"), fam, &["--hook-placement", "tc"]),
            ),
        ],
        &|i| {
            let (dst, _, ty) = fam.probes[i];
            format!("to {dst} (type {ty})")
        },
    );
}

#[test]
#[ignore = "needs root"]
fn addrtype_at_the_netfilter_hooks_and_tc_as_the_kernel() {
    agree(&v4(), "p13-at4");
}

#[test]
#[ignore = "needs root"]
fn addrtype_v6_at_the_netfilter_hooks_and_tc_as_the_kernel() {
    agree(&v6(), "p13-at6");
}
