//! Runs the real BPF program on crafted frames with BPF_PROG_TEST_RUN and
//! checks what it parsed (read back from the debug map) against
//! hand-written expectations and against the Rust twin parser.

mod common;

use std::net::{Ipv4Addr, Ipv6Addr};

use common::{load_dataplane, Rng};
use parapet_dataplane::abi::{FAMILY_IPV4, FAMILY_IPV6, FRAG_FRAGMENT, FRAG_LATER, KEY_F_VLAN};
use parapet_dataplane::frame::parse_frame;
use parapet_dataplane::frame::{Ext, Frame, L4};
use parapet_dataplane::{
    AttachPoint, Dataplane, KernelVerdict, LoadOptions, PacketKey, ParseStatus,
};

const A4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const B4: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 7);
const A6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
const B6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0xffff, 0, 0, 0, 0xabcd, 2);

/// Loopback: exists in every namespace, so test runs may name it.
const IFINDEX: u32 = 1;

fn debug_dp(test: &str) -> Dataplane {
    load_dataplane(
        test,
        &LoadOptions {
            debug: true,
            ..LoadOptions::default()
        },
    )
}

/// The kernel's skb test-run refuses (EINVAL) untagged IPv4/IPv6 frames
/// whose network header is shorter than the fixed header; such frames are
/// covered at XDP only (same parser code).
fn tc_test_run_refuses(frame: &[u8]) -> bool {
    match (frame.get(12), frame.get(13)) {
        (Some(0x08), Some(0x00)) => frame.len() < 14 + 20,
        (Some(0x86), Some(0xdd)) => frame.len() < 14 + 40,
        _ => false,
    }
}

/// Run `frame` through the program at `hook`; return the parse outcome and
/// the key the program recorded, after checking the verdict follows from
/// the parse outcome (policy ACCEPT, no rules). `None` when the kernel's
/// test-run refuses the frame for that hook.
fn run(dp: &Dataplane, hook: AttachPoint, frame: &[u8]) -> Option<(ParseStatus, PacketKey)> {
    let before = dp.last_decision().unwrap().map_or(0, |d| d.seq);
    let out = match dp.test_run(hook, frame, IFINDEX, 1) {
        Ok(out) => out,
        Err(_) if hook == AttachPoint::Tc && tc_test_run_refuses(frame) => return None,
        Err(e) => panic!("test run at {hook:?} failed: {e}; frame {frame:02x?}"),
    };
    let d = dp.last_decision().unwrap().expect("debug record written");
    assert_eq!(d.seq, before + 1, "program did not record this packet");
    let should_pass = matches!(d.status, ParseStatus::Ok | ParseStatus::NotIp);
    assert_eq!(
        out.passed, should_pass,
        "{hook:?} verdict for {:?}",
        d.status
    );
    assert_eq!(d.verdict == KernelVerdict::Accept, should_pass);
    Some((d.status, d.key))
}

fn v4(a: Ipv4Addr) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[12..].copy_from_slice(&a.octets());
    b
}

fn key4(proto: u8, len: u32) -> PacketKey {
    PacketKey {
        src: v4(A4),
        dst: v4(B4),
        ifindex: IFINDEX,
        pkt_len: len,
        family: FAMILY_IPV4,
        proto,
        ttl: 64, // Frame's default
        ..PacketKey::default()
    }
}

fn key6(proto: u8, len: u32) -> PacketKey {
    PacketKey {
        src: A6.octets(),
        dst: B6.octets(),
        ifindex: IFINDEX,
        pkt_len: len,
        family: FAMILY_IPV6,
        proto,
        ttl: 64,
        ..PacketKey::default()
    }
}

struct Case {
    name: &'static str,
    frame: Vec<u8>,
    status: ParseStatus,
    /// Expected key; checked only for Ok / NotIp.
    key: PacketKey,
}

fn ok(name: &'static str, frame: Vec<u8>, key: PacketKey) -> Case {
    Case {
        name,
        frame,
        status: ParseStatus::Ok,
        key,
    }
}

fn bad(name: &'static str, frame: Vec<u8>, status: ParseStatus) -> Case {
    Case {
        name,
        frame,
        status,
        key: PacketKey::default(),
    }
}

fn boundary_cases() -> Vec<Case> {
    let mut c = Vec::new();
    let tcp = |k: PacketKey, s, d, f| PacketKey {
        sport: s,
        dport: d,
        tcp_flags: f,
        ..k
    };
    let ports = |k: PacketKey, s, d| PacketKey {
        sport: s,
        dport: d,
        ..k
    };

    c.push(ok(
        "ipv4 tcp syn",
        Frame::ipv4(A4, B4)
            .tcp(40000, 443, 0x02)
            .payload(10)
            .build(),
        tcp(key4(6, 50), 40000, 443, 0x02),
    ));
    c.push(ok(
        "ipv4 ttl 1, dscp EF",
        Frame::ipv4(A4, B4).ttl(1).dscp(46).udp(1, 2).build(),
        PacketKey {
            ttl: 1,
            dscp: 46,
            ..ports(key4(17, 28), 1, 2)
        },
    ));
    c.push(ok(
        "ipv6 hop limit 255, dscp 0x27 (traffic class split across bytes 0 and 1)",
        Frame::ipv6(A6, B6).ttl(255).dscp(0x27).udp(1, 2).build(),
        PacketKey {
            ttl: 255,
            dscp: 0x27,
            ..ports(key6(17, 48), 1, 2)
        },
    ));
    c.push(ok(
        "ipv4 ihl 15 (40 bytes of options) udp",
        Frame::ipv4(A4, B4).ipv4_options(10).udp(53, 5353).build(),
        ports(key4(17, 68), 53, 5353),
    ));
    c.push(ok(
        "ipv4 first fragment keeps ports",
        Frame::ipv4(A4, B4)
            .ipv4_frag(0, true)
            .udp(1, 2)
            .payload(16)
            .build(),
        PacketKey {
            frag: FRAG_FRAGMENT,
            ..ports(key4(17, 44), 1, 2)
        },
    ));
    c.push(ok(
        "ipv4 later fragment has ports 0",
        Frame::ipv4(A4, B4)
            .ipv4_frag(3, false)
            .udp(1, 2)
            .payload(16)
            .build(),
        PacketKey {
            frag: FRAG_FRAGMENT | FRAG_LATER,
            ..key4(17, 36)
        },
    ));
    c.push(ok(
        "ipv4 icmp echo",
        Frame::ipv4(A4, B4).l4(L4::Icmp { ty: 8, code: 0 }).build(),
        PacketKey {
            icmp_type: 8,
            ..key4(1, 28)
        },
    ));
    c.push(ok(
        "ipv4 gre: unknown protocol, no ports",
        Frame::ipv4(A4, B4)
            .l4(L4::Raw {
                proto: 47,
                header: vec![0; 4],
            })
            .build(),
        key4(47, 24),
    ));
    c.push(ok(
        "ipv4 sctp ports",
        Frame::ipv4(A4, B4)
            .l4(L4::Raw {
                proto: 132,
                header: vec![0x0b, 0xb8, 0x0b, 0xb9, 0, 0, 0, 0, 0, 0, 0, 0],
            })
            .build(),
        ports(key4(132, 32), 3000, 3001),
    ));
    c.push(ok(
        "ethernet padding is not counted",
        {
            // a 42-byte frame padded to the 60-byte Ethernet minimum
            let mut f = Frame::ipv4(A4, B4).udp(7, 9).build();
            f.resize(60, 0);
            f
        },
        ports(key4(17, 28), 7, 9),
    ));
    c.push(ok(
        "802.1Q vid 100",
        Frame::ipv4(A4, B4).vlan(0x8100, 100).udp(1, 2).build(),
        PacketKey {
            flags: KEY_F_VLAN,
            vlan_id: 100,
            ..ports(key4(17, 28), 1, 2)
        },
    ));
    c.push(ok(
        "802.1ad + 802.1Q records the outer vid",
        Frame::ipv4(A4, B4)
            .vlan(0x88a8, 10)
            .vlan(0x8100, 20)
            .udp(1, 2)
            .build(),
        PacketKey {
            flags: KEY_F_VLAN,
            vlan_id: 10,
            ..ports(key4(17, 28), 1, 2)
        },
    ));
    c.push(ok(
        "ipv6 tcp",
        Frame::ipv6(A6, B6).tcp(1234, 22, 0x12).build(),
        tcp(key6(6, 60), 1234, 22, 0x12),
    ));
    c.push(ok(
        "ipv6 hbh + routing + dstopts + udp",
        Frame::ipv6(A6, B6)
            .ext(Ext::HopByHop { len8: 0 })
            .ext(Ext::Routing { len8: 2 })
            .ext(Ext::DestOpts { len8: 1 })
            .udp(5, 6)
            .build(),
        ports(key6(17, 40 + 8 + 24 + 16 + 8), 5, 6),
    ));
    c.push(ok(
        "ipv6 ah + tcp",
        Frame::ipv6(A6, B6)
            .ext(Ext::Ah { len4: 4 })
            .tcp(9, 10, 0x10)
            .build(),
        tcp(key6(6, 40 + 24 + 20), 9, 10, 0x10),
    ));
    c.push(ok(
        "ipv6 first fragment keeps ports",
        Frame::ipv6(A6, B6)
            .ext(Ext::Fragment {
                offset: 0,
                more: true,
            })
            .udp(11, 12)
            .build(),
        PacketKey {
            frag: FRAG_FRAGMENT,
            ..ports(key6(17, 56), 11, 12)
        },
    ));
    c.push(ok(
        "ipv6 later fragment: proto from the fragment header, ports 0",
        Frame::ipv6(A6, B6)
            .ext(Ext::Fragment {
                offset: 100,
                more: false,
            })
            .udp(11, 12)
            .payload(8)
            .build(),
        PacketKey {
            frag: FRAG_FRAGMENT | FRAG_LATER,
            ..key6(17, 56)
        },
    ));
    c.push(ok(
        "ipv6 atomic fragment is not a fragment",
        Frame::ipv6(A6, B6)
            .ext(Ext::Fragment {
                offset: 0,
                more: false,
            })
            .udp(11, 12)
            .build(),
        ports(key6(17, 56), 11, 12),
    ));
    let mut eight = Frame::ipv6(A6, B6);
    for _ in 0..8 {
        eight = eight.ext(Ext::DestOpts { len8: 0 });
    }
    c.push(ok(
        "ipv6 eight extension headers",
        eight.clone().udp(1, 2).build(),
        ports(key6(17, 40 + 64 + 8), 1, 2),
    ));
    c.push(bad(
        "ipv6 nine extension headers",
        eight.ext(Ext::DestOpts { len8: 0 }).udp(1, 2).build(),
        ParseStatus::ExtLimit,
    ));
    c.push(ok(
        "icmpv6 echo request",
        Frame::ipv6(A6, B6)
            .l4(L4::Icmpv6 { ty: 128, code: 0 })
            .build(),
        PacketKey {
            icmp_type: 128,
            ..key6(58, 48)
        },
    ));
    c.push(ok(
        "ipv6 payload length 0 (jumbo / BIG TCP) uses the frame",
        Frame::ipv6(A6, B6).udp(1, 2).l3_len(0).payload(4).build(),
        ports(key6(17, 52), 1, 2),
    ));
    c.push(Case {
        name: "arp is not ip",
        frame: Frame::non_ip(0x0806).payload(28).build(),
        status: ParseStatus::NotIp,
        key: PacketKey {
            ifindex: IFINDEX,
            pkt_len: 42,
            ..PacketKey::default()
        },
    });

    // --- refused frames ---
    c.push(bad(
        "ipv4 ihl 4",
        Frame::ipv4(A4, B4).ihl(4).udp(1, 2).build(),
        ParseStatus::Malformed,
    ));
    c.push(bad(
        "ipv4 version 5",
        {
            let mut f = Frame::ipv4(A4, B4).udp(1, 2).build();
            f[14] = 0x55;
            f
        },
        ParseStatus::Malformed,
    ));
    c.push(bad(
        "ipv4 total length below the header",
        Frame::ipv4(A4, B4).l3_len(19).udp(1, 2).build(),
        ParseStatus::Malformed,
    ));
    c.push(bad(
        "ipv4 total length beyond the frame",
        Frame::ipv4(A4, B4).l3_len(1000).udp(1, 2).build(),
        ParseStatus::Truncated,
    ));
    c.push(bad(
        "ipv4 header cut short",
        Frame::ipv4(A4, B4).udp(1, 2).truncate(14 + 12).build(),
        ParseStatus::Truncated,
    ));
    c.push(bad(
        "ipv4 options cut short",
        Frame::ipv4(A4, B4)
            .ipv4_options(10)
            .truncate(14 + 40)
            .build(),
        ParseStatus::Truncated,
    ));
    c.push(bad(
        "tcp header cut short (tiny first fragment)",
        Frame::ipv4(A4, B4)
            .ipv4_frag(0, true)
            .tcp(1, 2, 0x02)
            .l3_len(20 + 8)
            .build(),
        ParseStatus::Truncated,
    ));
    c.push(bad(
        "tcp data offset 4",
        Frame::ipv4(A4, B4)
            .l4(L4::Raw {
                proto: 6,
                header: {
                    let mut h = vec![0u8; 20];
                    h[12] = 4 << 4;
                    h
                },
            })
            .build(),
        ParseStatus::Malformed,
    ));
    c.push(bad(
        "udp header cut short",
        Frame::ipv4(A4, B4)
            .udp(1, 2)
            .truncate(14 + 20 + 6)
            .l3_len(26)
            .build(),
        ParseStatus::Truncated,
    ));
    c.push(bad(
        "three vlan tags",
        Frame::ipv4(A4, B4)
            .vlan(0x88a8, 1)
            .vlan(0x8100, 2)
            .vlan(0x8100, 3)
            .udp(1, 2)
            .build(),
        ParseStatus::ExtLimit,
    ));
    c.push(bad(
        "vlan tag cut short",
        Frame::ipv4(A4, B4).vlan(0x8100, 5).truncate(16).build(),
        ParseStatus::Truncated,
    ));
    c.push(bad(
        "ipv6 header cut short",
        Frame::ipv6(A6, B6).udp(1, 2).truncate(14 + 39).build(),
        ParseStatus::Truncated,
    ));
    c.push(bad(
        "ipv6 extension header beyond the payload length",
        Frame::ipv6(A6, B6)
            .ext(Ext::HopByHop { len8: 0 })
            .udp(1, 2)
            .l3_len(4)
            .build(),
        ParseStatus::Truncated,
    ));
    c.push(bad(
        "ipv6 version 4 in an ipv6 ethertype",
        {
            let mut f = Frame::ipv6(A6, B6).udp(1, 2).build();
            f[14] = 0x40;
            f
        },
        ParseStatus::Malformed,
    ));
    c.push(bad(
        "ipv6 extension chain deeper than the walk bound",
        Frame::ipv6(A6, B6)
            .ext(Ext::DestOpts { len8: 255 })
            .udp(1, 2)
            .build(),
        ParseStatus::Truncated,
    ));
    c
}

#[test]
#[ignore = "needs root"]
fn boundary_packets_parse_as_expected_at_both_hooks() {
    let dp = debug_dp("boundary_packets_parse_as_expected_at_both_hooks");
    let cases = boundary_cases();
    assert!(cases.len() > 30);
    for case in &cases {
        // The Rust twin agrees with the hand-written expectation...
        let (rs, rk) = parse_frame(&case.frame, case.frame.len() as u32, IFINDEX);
        assert_eq!(rs, case.status, "rust parser, {}", case.name);
        // ...and so does the kernel program at both hooks.
        for hook in [AttachPoint::Xdp, AttachPoint::Tc] {
            let Some((s, k)) = run(&dp, hook, &case.frame) else {
                continue;
            };
            assert_eq!(s, case.status, "{hook:?}, {}", case.name);
            if matches!(s, ParseStatus::Ok | ParseStatus::NotIp) {
                assert_eq!(k, case.key, "{hook:?}, {}", case.name);
                assert_eq!(rk, case.key, "rust parser, {}", case.name);
            }
        }
    }
}

/// A random, mostly plausible frame: random layers, then random damage.
fn random_frame(rng: &mut Rng) -> Vec<u8> {
    let mut f = match rng.below(10) {
        0 => Frame::non_ip(if rng.chance(50) { 0x0806 } else { rng.u16() }),
        1..=5 => {
            let mut f = Frame::ipv4(
                Ipv4Addr::from(rng.next() as u32),
                Ipv4Addr::from(rng.next() as u32),
            );
            if rng.chance(30) {
                f = f.ipv4_options(rng.below(11) as usize);
            }
            if rng.chance(20) {
                f = f.ipv4_frag(
                    if rng.chance(50) {
                        0
                    } else {
                        rng.u16() & 0x1fff
                    },
                    rng.chance(50),
                );
            }
            f
        }
        _ => {
            let mut f = Frame::ipv6(
                Ipv6Addr::from(u128::from(rng.next()) << 64 | u128::from(rng.next())),
                Ipv6Addr::from(u128::from(rng.next()) << 64 | u128::from(rng.next())),
            );
            for _ in 0..rng.below(11) {
                let len8 = rng.below(4) as u8;
                f = f.ext(match rng.below(5) {
                    0 => Ext::HopByHop { len8 },
                    1 => Ext::Routing { len8 },
                    2 => Ext::DestOpts { len8 },
                    3 => Ext::Ah { len4: len8 * 2 },
                    _ => Ext::Fragment {
                        offset: if rng.chance(50) {
                            0
                        } else {
                            rng.u16() & 0x1fff
                        },
                        more: rng.chance(50),
                    },
                });
            }
            f
        }
    };
    for _ in 0..rng.below(4).saturating_sub(1) {
        f = f.vlan(
            if rng.chance(50) { 0x8100 } else { 0x88a8 },
            rng.u16() & 0xfff,
        );
    }
    let (s, d) = (rng.u16(), rng.u16());
    f = match rng.below(8) {
        0 | 1 => f.tcp(s, d, rng.u8()),
        2 | 3 => f.udp(s, d),
        4 => f.l4(L4::Icmp {
            ty: rng.u8(),
            code: rng.u8(),
        }),
        5 => f.l4(L4::Icmpv6 {
            ty: rng.u8(),
            code: rng.u8(),
        }),
        _ => {
            let protos = [132u8, 33, 136, 47, 50, 59, 6, 17, rng.u8()];
            let proto = protos[rng.below(protos.len() as u64) as usize];
            let header = (0..rng.below(24)).map(|_| rng.u8()).collect();
            f.l4(L4::Raw { proto, header })
        }
    };
    f = f
        .payload(rng.below(80) as usize)
        .ttl(rng.u8())
        .dscp(rng.u8());
    if rng.chance(10) {
        f = f.l3_len(rng.u16() % 200);
    }
    let mut bytes = f.build();
    if rng.chance(20) {
        let len = 14 + rng.below(bytes.len().saturating_sub(13) as u64) as usize;
        bytes.truncate(len);
    }
    if rng.chance(15) {
        let n = bytes.len().min(100);
        let i = rng.below(n as u64) as usize;
        bytes[i] = rng.u8();
    }
    bytes
}

#[test]
#[ignore = "needs root"]
fn random_frames_kernel_and_rust_parsers_agree() {
    let dp = debug_dp("random_frames_kernel_and_rust_parsers_agree");
    let mut rng = Rng::new(0x5eed_f00d_9a4a_09e7);
    let mut seen = std::collections::HashMap::new();
    for i in 0..3000 {
        let frame = random_frame(&mut rng);
        let (rs, rk) = parse_frame(&frame, frame.len() as u32, IFINDEX);
        for hook in [AttachPoint::Xdp, AttachPoint::Tc] {
            let Some((s, k)) = run(&dp, hook, &frame) else {
                continue;
            };
            assert_eq!(
                (s, k),
                (rs, rk),
                "frame #{i} at {hook:?} differs from the Rust parser: {frame:02x?}"
            );
        }
        *seen.entry(rs).or_insert(0u32) += 1;
    }
    // The generator must actually reach every outcome, or the test is weak.
    for s in [
        ParseStatus::Ok,
        ParseStatus::NotIp,
        ParseStatus::Truncated,
        ParseStatus::Malformed,
        ParseStatus::ExtLimit,
    ] {
        assert!(
            seen.get(&s).copied().unwrap_or(0) >= 10,
            "{s:?} rare: {seen:?}"
        );
    }
}
