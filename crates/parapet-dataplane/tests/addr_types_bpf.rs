//! The address-type mirror end to end in one namespace: the rtnetlink dump
//! of its `local` table ([`local_table`]) put into the trie, then frames
//! test-run through an image whose rules are the destination's type. The
//! kernel made the table (`ip addr add` on lo: a host address, its /24 as
//! a LOCAL prefix — the AnyIP route —, the subnet broadcast; IPv6 an
//! address and ::1); removing the address and mirroring again makes it
//! UNICAST. Needs root.

mod common;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use common::image::*;
use common::load_dataplane;
use parapet_dataplane::addr_types::{local_table, RTN_BROADCAST, RTN_LOCAL};
use parapet_dataplane::frame::Frame;
use parapet_dataplane::{AttachPoint, Dataplane, LoadOptions};
use parapet_model::addr_type;
use parapet_testbed::Netns;

/// The destination type field's id (key word 35).
const DTYPE: u32 = 21;

/// Rule `t + 1` matches destination type `t`, for every type 0..=5; the
/// policy (rule 0) anything else.
fn by_type_image() -> ImageSpec {
    let entries: Vec<Entry> = (0..=5u32)
        .map(|t| Entry {
            rule_id: t + 1,
            kind: KIND_DECIDE,
            counted: false,
            verdict: 0,
            resume: 0,
            constraints: vec![Constraint::Ranges {
                field: DTYPE,
                wide: false,
                ranges: vec![(u128::from(t), u128::from(t))],
            }],
        })
        .collect();
    ImageSpec {
        partitions: vec![Tree::Leaf((0..entries.len() as u32).collect())],
        entries,
        verdicts: vec![0],
        policy: 0,
    }
}

/// The destination type the program gives a UDP packet to `dst`.
fn dst_type(dp: &Dataplane, dst: IpAddr) -> u8 {
    let frame = match dst {
        IpAddr::V4(d) => Frame::ipv4(Ipv4Addr::new(192, 0, 2, 1), d),
        IpAddr::V6(d) => Frame::ipv6("2001:db8:ffff::1".parse().unwrap(), d),
    }
    .udp(1000, 53)
    .build();
    dp.test_run(AttachPoint::Xdp, &frame, 1, 1).unwrap();
    let d = dp.last_decision().unwrap().unwrap();
    assert!(d.by_image && (1..=6).contains(&d.rule_id), "{dst}: {d:?}");
    (d.rule_id - 1) as u8
}

#[test]
#[ignore = "needs root"]
fn the_mirror_types_addresses_as_the_namespaces_local_table() {
    let mut dp = load_dataplane(
        "the_mirror_types_addresses_as_the_namespaces_local_table",
        &LoadOptions {
            debug: true,
            ..LoadOptions::default()
        },
    );
    dp.write_image(&to_bytes(&assemble(&by_type_image())))
        .unwrap();
    dp.swap().unwrap();
    let ns = Netns::create("p13-addrmir").unwrap();
    ns.ip(&["addr", "add", "10.77.0.2/24", "brd", "+", "dev", "lo"])
        .unwrap();
    ns.ip(&[
        "-6",
        "addr",
        "add",
        "2001:db8:77::5/128",
        "dev",
        "lo",
        "nodad",
    ])
    .unwrap();
    ns.wait_local_route("2001:db8:77::5").unwrap();
    let routes = ns.run_in(local_table).unwrap();
    let has = |a: &str, len: u8, kind: u8| {
        routes.iter().any(|r| {
            r.addr == a.parse::<IpAddr>().unwrap() && r.prefix_len == len && r.kind == kind
        })
    };
    assert!(has("10.77.0.0", 24, RTN_LOCAL), "{routes:?}");
    assert!(has("10.77.0.255", 32, RTN_BROADCAST), "{routes:?}");
    assert!(has("2001:db8:77::5", 128, RTN_LOCAL), "{routes:?}");
    dp.set_addr_types(&routes).unwrap();

    use addr_type::*;
    let v4 = |s: &str| IpAddr::V4(s.parse().unwrap());
    let v6 = |s: &str| IpAddr::V6(s.parse::<Ipv6Addr>().unwrap());
    let cases = [
        (v4("10.77.0.2"), LOCAL),
        (v4("10.77.0.99"), LOCAL), // the /24 on lo is a LOCAL prefix
        (v4("10.77.0.255"), BROADCAST),
        (v4("127.0.0.1"), LOCAL),
        (v4("127.255.255.255"), BROADCAST),
        (v4("255.255.255.255"), BROADCAST),
        (v4("0.1.2.3"), BROADCAST),
        (v4("224.0.0.1"), MULTICAST),
        (v4("10.78.0.1"), UNICAST),
        (v6("2001:db8:77::5"), LOCAL),
        (v6("::1"), LOCAL),
        (v6("ff02::1"), MULTICAST),
        (v6("2001:db8:77::6"), UNICAST),
    ];
    for (a, want) in cases {
        assert_eq!(dst_type(&dp, a), want, "{a}");
    }

    // The address goes: mirrored again, its /24 is no longer LOCAL.
    ns.ip(&["addr", "del", "10.77.0.2/24", "dev", "lo"])
        .unwrap();
    let routes = ns.run_in(local_table).unwrap();
    dp.set_addr_types(&routes).unwrap();
    assert_eq!(dst_type(&dp, v4("10.77.0.2")), UNICAST);
    assert_eq!(dst_type(&dp, v4("10.77.0.255")), UNICAST);
    assert_eq!(dst_type(&dp, v4("127.0.0.1")), LOCAL);
}
