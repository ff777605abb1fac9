//! The reverse-path outcome in the kernel dataplane (bpf/lib/rev_path.h):
//! a namespace with two veth pairs, routes through each, unreachable and
//! blackhole prefixes and no default route; UDP frames test-run through
//! the XDP and tc programs as if they arrived on the first pair's end,
//! from sources routed through it, through the other interface, nowhere,
//! the host's own addresses and the lookups nft skips. Each packet's
//! outcome (the rule of an image with a rule per outcome) is the one the
//! namespace's `ip route get` gives (the model's `rpath`: iif, other,
//! none), with forwarding off (a host) and on (a router). An image that
//! reads the outcome at the netfilter hooks, where there is no lookup, is
//! abandoned (the walk never guesses). Needs root.

mod common;

use std::net::IpAddr;

use common::installed::install;
use common::load_dataplane;
use parapet_compile::{compile, CompileOptions};
use parapet_dataplane::frame::Frame;
use parapet_dataplane::{AttachPoint, Dataplane, LoadOptions};
use parapet_model::*;
use parapet_testbed::Netns;

/// Rule `t + 1` matches outcome `t` (iif, other, none); policy ACCEPT.
fn by_outcome() -> (Ruleset, Vec<u8>) {
    let rules = (0..=rev_path::MAX)
        .map(|t| {
            let mut m = Matches::any();
            m.constrain(Field::RevPath, IntervalSet::point(t as u128));
            Rule::new(t as u32 + 1, m, Action::Verdict(Verdict::Drop))
        })
        .collect();
    let rs = parapet_gen::one_chain(rules, Verdict::Accept);
    let list = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
    let image = compile(&list, &CompileOptions::default())
        .unwrap()
        .0
        .to_bytes();
    (rs, image)
}

/// Forwarding on at lo, as parapetd turns it on for the lookups.
fn lo_forwarding(ns: &Netns) {
    for v in [
        "net.ipv4.conf.lo.forwarding=1",
        "net.ipv6.conf.lo.forwarding=1",
    ] {
        ns.exec(&["sysctl", "-qw", v]).unwrap();
    }
}

fn ifindex(ns: &Netns, dev: &str) -> u32 {
    let out = ns.ip(&["-o", "link", "show", dev]).unwrap();
    out.split(':').next().unwrap().trim().parse().unwrap()
}

/// The namespace: r0 (10.81.0.1/24, 2001:db8:81::1/64) and r1
/// (10.82.0.1/24, 2001:db8:82::1/64), each a veth end whose peer is up;
/// 10.83.0.0/24 and 2001:db8:83::/64 through r1, 10.84.0.0/24
/// unreachable, 10.85.0.0/24 blackhole, 10.86.0.0/24 prohibit.
fn bed() -> Netns {
    let ns = Netns::create("p13-rpath").unwrap();
    for (i, dev) in ["r0", "r1"].iter().enumerate() {
        let peer = format!("{dev}p");
        ns.ip(&["link", "add", dev, "type", "veth", "peer", "name", &peer])
            .unwrap();
        ns.ip(&["link", "set", dev, "up"]).unwrap();
        ns.ip(&["link", "set", &peer, "up"]).unwrap();
        let v4 = format!("10.8{}.0.1/24", i + 1);
        let v6 = format!("2001:db8:8{}::1/64", i + 1);
        ns.ip(&["addr", "add", &v4, "dev", dev]).unwrap();
        ns.ip(&["-6", "addr", "add", &v6, "dev", dev, "nodad"])
            .unwrap();
    }
    for r in [
        &["route", "add", "10.83.0.0/24", "dev", "r1"][..],
        &["-6", "route", "add", "2001:db8:83::/64", "dev", "r1"],
        &["route", "add", "unreachable", "10.84.0.0/24"],
        &["route", "add", "blackhole", "10.85.0.0/24"],
        &["route", "add", "prohibit", "10.86.0.0/24"],
    ] {
        ns.ip(r).unwrap();
    }
    ns
}

/// (source, destination, outcome): what `ip route get SOURCE` says for a
/// packet arriving on r0 (nft_fib's skips: the limited broadcast from
/// 0.0.0.0, link-local sources).
fn cases() -> Vec<(IpAddr, IpAddr, u8)> {
    use rev_path::*;
    let a = |s: &str| s.parse::<IpAddr>().unwrap();
    let (d4, d6) = (a("10.81.0.1"), a("2001:db8:81::1"));
    vec![
        (a("10.81.0.7"), d4, IIF),
        (a("10.82.0.7"), d4, OTHER),
        (a("10.83.0.7"), d4, OTHER),
        (a("10.84.0.7"), d4, NONE),
        (a("10.85.0.7"), d4, NONE),
        (a("10.86.0.7"), d4, NONE),
        (a("192.0.2.1"), d4, NONE),
        (a("10.81.0.1"), d4, NONE),
        (a("10.82.0.1"), d4, NONE),
        (a("0.0.0.0"), a("255.255.255.255"), IIF),
        (a("0.0.0.0"), a("224.0.0.22"), IIF),
        (a("10.81.0.7"), a("224.0.0.251"), IIF),
        (a("10.82.0.7"), a("10.81.0.255"), OTHER),
        (a("2001:db8:81::7"), d6, IIF),
        (a("2001:db8:82::7"), d6, OTHER),
        (a("2001:db8:83::7"), d6, OTHER),
        (a("2001:db8:99::7"), d6, NONE),
        (a("2001:db8:81::1"), d6, NONE),
        (a("fe80::7"), d6, IIF),
        (a("2001:db8:82::7"), a("ff02::1"), OTHER),
        (a("2001:db8:81::7"), a("fe80::1"), IIF),
    ]
}

fn frame(src: IpAddr, dst: IpAddr) -> Vec<u8> {
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => Frame::ipv4(s, d),
        (IpAddr::V6(s), IpAddr::V6(d)) => Frame::ipv6(s, d),
        _ => unreachable!(),
    }
    .udp(40000, 53)
    .build()
}

/// The outcome the program gives `frame` arriving on `ifindex` (the rule
/// that decided, less one), or `None` when the image was abandoned.
fn outcome(dp: &Dataplane, at: AttachPoint, frame: &[u8], ifindex: u32) -> Option<u8> {
    dp.test_run(at, frame, ifindex, 1).unwrap();
    let d = dp.last_decision().unwrap().unwrap();
    (d.by_image && (1..=3).contains(&d.rule_id)).then(|| (d.rule_id - 1) as u8)
}

#[test]
#[ignore = "needs root"]
fn the_programs_look_sources_up_as_nft_fib_does() {
    let mut dp = load_dataplane(
        "the_programs_look_sources_up_as_nft_fib_does",
        &LoadOptions {
            debug: true,
            ..LoadOptions::default()
        },
    );
    let (rs, image) = by_outcome();
    install(&mut dp, &rs, &Verdict::Accept, &image);
    assert!(
        dp.reads_rev_path().unwrap(),
        "the install turns the lookups on"
    );
    assert!(
        parapet_dataplane::rev_path::lo_forwarding_on(),
        "and forwarding at lo, which the helper wants"
    );
    let ns = bed();
    let r0 = ifindex(&ns, "r0");
    for forwarding in ["1", "0"] {
        ns.exec(&[
            "sysctl",
            "-qw",
            &format!("net.ipv4.ip_forward={forwarding}"),
        ])
        .unwrap();
        ns.exec(&[
            "sysctl",
            "-qw",
            &format!("net.ipv6.conf.all.forwarding={forwarding}"),
        ])
        .unwrap();
        // writing ip_forward sets every device's forwarding, lo's too:
        // the lookups from lo want it on (src/rev_path.rs)
        lo_forwarding(&ns);
        for at in [AttachPoint::Xdp, AttachPoint::Tc] {
            let got: Vec<_> = ns.run_in(|| {
                cases()
                    .into_iter()
                    .map(|(s, d, want)| (s, d, want, outcome(&dp, at, &frame(s, d), r0)))
                    .collect()
            });
            for (s, d, want, got) in got {
                assert_eq!(
                    got,
                    Some(want),
                    "{at:?} forwarding={forwarding}: {s} -> {d} on r0"
                );
            }
            // a packet from loopback: the lookup nft skips
            let lo = ns.run_in(|| outcome(&dp, at, &frame(cases()[1].0, cases()[1].1), 1));
            assert_eq!(lo, Some(rev_path::IIF), "{at:?}: from lo");
        }
    }
    // forwarding off at lo: the helper refuses (FWD_DISABLED), and the
    // walk is abandoned rather than guess an outcome
    ns.exec(&["sysctl", "-qw", "net.ipv4.conf.lo.forwarding=0"])
        .unwrap();
    for at in [AttachPoint::Xdp, AttachPoint::Tc] {
        let (s, d, _) = cases()[1];
        let got = ns.run_in(|| outcome(&dp, at, &frame(s, d), r0));
        assert_eq!(got, None, "{at:?}: no lookup, no outcome");
        let w = dp.last_decision().unwrap().unwrap();
        assert_eq!(w.walk_err, 24, "{at:?}: {w:?}");
    }
}
