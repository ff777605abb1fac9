//! REJECT answers through `BPF_PROG_TEST_RUN`: the frame the program
//! leaves must equal, byte for byte, the answer an independent Rust
//! builder makes (TCP resets and ICMP / ICMPv6 errors of every
//! `--reject-with` type, IPv4 and IPv6), the checksums must verify on
//! their own, packets that must never be answered are only dropped, the
//! global reply rate holds, and a compiled image carries the type to the
//! kernel. Needs root (`#[ignore = "needs root"]`).

mod common;

use std::net::{Ipv4Addr, Ipv6Addr};

use common::{iptables_image, load_dataplane};
use parapet_dataplane::abi::reject;
use parapet_dataplane::frame::{Ext, Frame, L4};
use parapet_dataplane::{AttachPoint, Dataplane, KernelVerdict, LoadOptions, Stat};

const A4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const B4: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 7);
const A6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
const B6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 1, 0, 0, 0, 2);

const XDP_DROP: u32 = 1;
const XDP_TX: u32 = 3;
const TC_ACT_SHOT: u32 = 2;
const TC_ACT_REDIRECT: u32 = 7;

fn load(test: &str) -> Dataplane {
    let mut dp = load_dataplane(
        test,
        &LoadOptions {
            max_rules: 15,
            slot_pages: 64,
            debug: true,
        },
    );
    // rule 1 decides everything; the tests count answers, not the limit
    dp.set_lite_rule(0, 0, 1).unwrap();
    dp.set_reject_rate(1_000_000, 1_000_000).unwrap();
    dp
}

// ---- an independent builder of the expected answers ----------------------

/// RFC 1071 sum of `b` as big-endian 16-bit words (odd tail padded).
fn sum16(b: &[u8]) -> u32 {
    b.chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum()
}

fn fold(mut s: u32) -> u16 {
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// Pseudo-header sum (RFC 793 / RFC 8200 8.1).
fn pseudo(src: &[u8], dst: &[u8], proto: u8, len: usize) -> u32 {
    sum16(src) + sum16(dst) + u32::from(proto) + (len as u32 >> 16) + (len as u32 & 0xffff)
}

/// Where the frame's IP header and transport header are (the frames of
/// these tests: VLAN tags, IPv4 options, IPv6 hop-by-hop headers).
fn offsets(f: &[u8]) -> (usize, usize) {
    let mut l3 = 12;
    while matches!(u16::from_be_bytes([f[l3], f[l3 + 1]]), 0x8100 | 0x88a8) {
        l3 += 4;
    }
    l3 += 2;
    if f[l3] >> 4 == 4 {
        return (l3, l3 + usize::from(f[l3] & 0xf) * 4);
    }
    let (mut nh, mut l4) = (f[l3 + 6], l3 + 40);
    while nh == 0 || nh == 60 {
        nh = f[l4];
        l4 += (usize::from(f[l4 + 1]) + 1) * 8;
    }
    (l3, l4)
}

enum Want {
    Rst,
    Icmp(u8, u8),
}

/// The answer to `f`: Ethernet (and tags) with MACs swapped, then a fresh
/// IP header from the packet's destination to its source, then the RST or
/// the ICMP error quoting the packet.
fn expected(f: &[u8], want: Want) -> Vec<u8> {
    let (l3, l4) = offsets(f);
    let v6 = f[l3] >> 4 == 6;
    let (src, dst) = if v6 {
        (&f[l3 + 8..l3 + 24], &f[l3 + 24..l3 + 40])
    } else {
        (&f[l3 + 12..l3 + 16], &f[l3 + 16..l3 + 20])
    };
    let l3_len = if v6 {
        40 + usize::from(u16::from_be_bytes([f[l3 + 4], f[l3 + 5]]))
    } else {
        usize::from(u16::from_be_bytes([f[l3 + 2], f[l3 + 3]]))
    };
    let (proto, body) = match want {
        Want::Rst => {
            let th = &f[l4..l4 + 20];
            let flags = th[13];
            let mut t = vec![0u8; 20];
            t[0..2].copy_from_slice(&th[2..4]);
            t[2..4].copy_from_slice(&th[0..2]);
            t[12] = 0x50;
            if flags & 0x10 != 0 {
                t[4..8].copy_from_slice(&th[8..12]);
                t[13] = 0x04;
            } else {
                let seg = l3_len - (l4 - l3);
                let data = seg - usize::from(th[12] >> 4) * 4;
                let seq = u32::from_be_bytes(th[4..8].try_into().unwrap())
                    .wrapping_add(data as u32)
                    .wrapping_add(u32::from(flags & 0x02 != 0))
                    .wrapping_add(u32::from(flags & 0x01 != 0));
                t[8..12].copy_from_slice(&seq.to_be_bytes());
                t[13] = 0x14;
            }
            let c = fold(pseudo(dst, src, 6, 20) + sum16(&t));
            t[16..18].copy_from_slice(&c.to_be_bytes());
            (6u8, t)
        }
        Want::Icmp(ty, code) => {
            let quote = if v6 {
                l3_len.min(1280 - 48)
            } else {
                (l4 - l3 + 8).min(l3_len)
            };
            let mut m = vec![ty, code, 0, 0, 0, 0, 0, 0];
            m.extend_from_slice(&f[l3..l3 + quote]);
            let (p, s) = if v6 {
                (58u8, pseudo(dst, src, 58, m.len()))
            } else {
                (1u8, 0)
            };
            let c = fold(s + sum16(&m));
            m[2..4].copy_from_slice(&c.to_be_bytes());
            (p, m)
        }
    };
    let mut out = Vec::new();
    out.extend_from_slice(&f[6..12]);
    out.extend_from_slice(&f[0..6]);
    out.extend_from_slice(&f[12..l3]);
    if v6 {
        out.extend_from_slice(&[0x60, 0, 0, 0]);
        out.extend_from_slice(&(body.len() as u16).to_be_bytes());
        out.extend_from_slice(&[proto, 64]);
        out.extend_from_slice(dst);
        out.extend_from_slice(src);
    } else {
        let mut h = [0u8; 20];
        h[0] = 0x45;
        h[1] = if proto == 6 { 0 } else { 0xc0 };
        h[2..4].copy_from_slice(&((20 + body.len()) as u16).to_be_bytes());
        if proto == 6 {
            h[6] = 0x40; // DF
        }
        h[8] = 64;
        h[9] = proto;
        h[12..16].copy_from_slice(dst);
        h[16..20].copy_from_slice(src);
        let c = fold(sum16(&h));
        h[10..12].copy_from_slice(&c.to_be_bytes());
        out.extend_from_slice(&h);
    }
    out.extend_from_slice(&body);
    out
}

/// Checks the answer's checksums without the builder: the IPv4 header and
/// the transport message with its pseudo-header must each sum to 0xffff.
fn checksums_verify(r: &[u8]) {
    let (l3, _) = offsets(r);
    if r[l3] >> 4 == 4 {
        assert_eq!(fold(sum16(&r[l3..l3 + 20])), 0, "IPv4 header checksum");
        let proto = r[l3 + 9];
        let len = usize::from(u16::from_be_bytes([r[l3 + 2], r[l3 + 3]])) - 20;
        let m = &r[l3 + 20..l3 + 20 + len];
        let ps = if proto == 6 {
            pseudo(&r[l3 + 12..l3 + 16], &r[l3 + 16..l3 + 20], 6, len)
        } else {
            0
        };
        assert_eq!(fold(ps + sum16(m)), 0, "IPv4 transport checksum");
    } else {
        let len = usize::from(u16::from_be_bytes([r[l3 + 4], r[l3 + 5]]));
        let m = &r[l3 + 40..l3 + 40 + len];
        let ps = pseudo(&r[l3 + 8..l3 + 24], &r[l3 + 24..l3 + 40], r[l3 + 6], len);
        assert_eq!(fold(ps + sum16(m)), 0, "IPv6 transport checksum");
    }
}

fn with_seq(mut f: Vec<u8>, seq: u32, ack: u32) -> Vec<u8> {
    let (_, l4) = offsets(&f);
    f[l4 + 4..l4 + 8].copy_from_slice(&seq.to_be_bytes());
    f[l4 + 8..l4 + 12].copy_from_slice(&ack.to_be_bytes());
    f
}

fn run(dp: &Dataplane, hook: AttachPoint, f: &[u8]) -> (u32, Vec<u8>) {
    let (o, out) = dp.test_run_output(hook, f, 0).unwrap();
    (o.retval, out)
}

fn answer_code(hook: AttachPoint) -> u32 {
    match hook {
        AttachPoint::Xdp => XDP_TX,
        AttachPoint::Tc => TC_ACT_REDIRECT,
        AttachPoint::Netfilter => unreachable!("no answers at the netfilter hooks"),
    }
}

fn drop_code(hook: AttachPoint) -> u32 {
    match hook {
        AttachPoint::Xdp => XDP_DROP,
        AttachPoint::Tc => TC_ACT_SHOT,
        AttachPoint::Netfilter => unreachable!("tested in tests/netfilter.rs"),
    }
}

#[test]
#[ignore = "needs root"]
fn answers_equal_the_rust_builder() {
    let mut dp = load("answers_equal_the_rust_builder");
    let tcp4 =
        |flags: u8, payload: usize| Frame::ipv4(A4, B4).tcp(40000, 80, flags).payload(payload);
    let tcp6 =
        |flags: u8, payload: usize| Frame::ipv6(A6, B6).tcp(40000, 80, flags).payload(payload);
    let rst = reject::TCP_RESET;
    let mut cases: Vec<(&str, u8, Vec<u8>, Want)> = vec![
        (
            "v4 SYN",
            rst,
            with_seq(tcp4(0x02, 0).build(), 1000, 0),
            Want::Rst,
        ),
        (
            "v4 SYN+data",
            rst,
            with_seq(tcp4(0x02, 10).build(), u32::MAX - 3, 0),
            Want::Rst,
        ),
        (
            "v4 ACK+data",
            rst,
            with_seq(tcp4(0x18, 100).build(), 5, 0xdead_beef),
            Want::Rst,
        ),
        (
            "v4 FIN+ACK",
            rst,
            with_seq(tcp4(0x11, 0).build(), 7, 99),
            Want::Rst,
        ),
        (
            "v4 FIN no ACK",
            rst,
            with_seq(tcp4(0x01, 3).build(), 7, 99),
            Want::Rst,
        ),
        (
            "v4 PSH no ACK",
            rst,
            with_seq(tcp4(0x08, 5).build(), 70, 0),
            Want::Rst,
        ),
        (
            "v4 options SYN",
            rst,
            with_seq(tcp4(0x02, 0).ipv4_options(3).build(), 1, 0),
            Want::Rst,
        ),
        (
            "v6 SYN",
            rst,
            with_seq(tcp6(0x02, 0).build(), 1000, 0),
            Want::Rst,
        ),
        (
            "v6 ACK+data",
            rst,
            with_seq(tcp6(0x10, 33).build(), 5, 77),
            Want::Rst,
        ),
        (
            "v6 hop-by-hop SYN+data",
            rst,
            with_seq(tcp6(0x02, 9).ext(Ext::HopByHop { len8: 1 }).build(), 9, 0),
            Want::Rst,
        ),
        (
            "VLAN v4 SYN",
            rst,
            with_seq(tcp4(0x02, 0).vlan(0x8100, 42).build(), 3, 0),
            Want::Rst,
        ),
        // default REJECT of TCP is an ICMP port unreachable, as in iptables
        (
            "v4 TCP default",
            reject::DEFAULT,
            tcp4(0x02, 0).build(),
            Want::Icmp(3, 3),
        ),
        (
            "v6 TCP default",
            reject::DEFAULT,
            tcp6(0x02, 0).build(),
            Want::Icmp(1, 4),
        ),
        (
            "v4 UDP default, payload",
            reject::DEFAULT,
            Frame::ipv4(A4, B4).udp(5353, 9).payload(100).build(),
            Want::Icmp(3, 3),
        ),
        (
            "v4 UDP options",
            reject::DEFAULT,
            Frame::ipv4(A4, B4)
                .ipv4_options(2)
                .udp(5353, 9)
                .payload(3)
                .build(),
            Want::Icmp(3, 3),
        ),
        (
            "v4 UDP short",
            reject::DEFAULT,
            Frame::ipv4(A4, B4).udp(5353, 9).build(),
            Want::Icmp(3, 3),
        ),
        (
            "v4 ICMP echo",
            reject::DEFAULT,
            Frame::ipv4(A4, B4)
                .l4(L4::Icmp { ty: 8, code: 0 })
                .payload(56)
                .build(),
            Want::Icmp(3, 3),
        ),
        (
            "v6 UDP small",
            reject::DEFAULT,
            Frame::ipv6(A6, B6).udp(5353, 9).payload(11).build(),
            Want::Icmp(1, 4),
        ),
        (
            "v6 UDP 1500 (quote cut at 1280)",
            reject::DEFAULT,
            Frame::ipv6(A6, B6).udp(5353, 9).payload(1500).build(),
            Want::Icmp(1, 4),
        ),
        (
            "v6 hop-by-hop UDP",
            reject::DEFAULT,
            Frame::ipv6(A6, B6)
                .ext(Ext::HopByHop { len8: 0 })
                .udp(1, 9)
                .payload(7)
                .build(),
            Want::Icmp(1, 4),
        ),
        (
            "VLAN v6 UDP",
            reject::DEFAULT,
            Frame::ipv6(A6, B6)
                .vlan(0x8100, 7)
                .udp(1, 9)
                .payload(7)
                .build(),
            Want::Icmp(1, 4),
        ),
    ];
    let udp4 = || Frame::ipv4(A4, B4).udp(5353, 9).payload(20).build();
    let udp6 = || Frame::ipv6(A6, B6).udp(5353, 9).payload(20).build();
    for (t, c) in [
        (reject::ICMP_NET_UNREACHABLE, 0),
        (reject::ICMP_HOST_UNREACHABLE, 1),
        (reject::ICMP_PORT_UNREACHABLE, 3),
        (reject::ICMP_PROTO_UNREACHABLE, 2),
        (reject::ICMP_NET_PROHIBITED, 9),
        (reject::ICMP_HOST_PROHIBITED, 10),
        (reject::ICMP_ADMIN_PROHIBITED, 13),
        (reject::ICMPX_NO_ROUTE, 0),
        (reject::ICMPX_ADMIN_PROHIBITED, 13),
        (reject::ICMPX_HOST_UNREACHABLE, 1),
        (reject::ICMPX_PORT_UNREACHABLE, 3),
    ] {
        cases.push(("v4 type", t, udp4(), Want::Icmp(3, c)));
    }
    for (t, c) in [
        (reject::ICMP6_NO_ROUTE, 0),
        (reject::ICMP6_ADM_PROHIBITED, 1),
        (reject::ICMP6_ADDR_UNREACHABLE, 3),
        (reject::ICMP6_PORT_UNREACHABLE, 4),
        (reject::ICMP6_POLICY_FAIL, 5),
        (reject::ICMP6_REJECT_ROUTE, 6),
        (reject::ICMPX_NO_ROUTE, 0),
        (reject::ICMPX_ADMIN_PROHIBITED, 1),
        (reject::ICMPX_HOST_UNREACHABLE, 3),
        (reject::ICMPX_PORT_UNREACHABLE, 4),
    ] {
        cases.push(("v6 type", t, udp6(), Want::Icmp(1, c)));
    }
    let mut answered = 0u64;
    for (name, rtype, frame, want) in cases {
        dp.set_action_reject(1, rtype, false).unwrap();
        let exp = expected(&frame, want);
        checksums_verify(&exp);
        for hook in [AttachPoint::Xdp, AttachPoint::Tc] {
            let (rc, out) = run(&dp, hook, &frame);
            assert_eq!(
                rc,
                answer_code(hook),
                "{name} (type {rtype}) at {hook:?}: return code"
            );
            assert_eq!(
                out, exp,
                "{name} (type {rtype}) at {hook:?}: answer differs"
            );
            checksums_verify(&out);
            let d = dp.last_decision().unwrap().unwrap();
            assert_eq!(
                (d.verdict, d.reject),
                (KernelVerdict::Reject, rtype),
                "{name}"
            );
            answered += 1;
        }
    }
    let st = dp.stats().unwrap();
    assert_eq!(st.get(Stat::RejectSent), answered);
    assert_eq!(st.get(Stat::RejectFailed), 0);
    assert_eq!(st.get(Stat::RejectNoReply), 0);
}

#[test]
#[ignore = "needs root"]
fn some_packets_are_never_answered() {
    let mut dp = load("some_packets_are_never_answered");
    let mut bcast = Frame::ipv4(A4, B4).udp(1, 9).build();
    bcast[0..6].copy_from_slice(&[0xff; 6]);
    let mut mcast_mac = Frame::ipv6(A6, B6).udp(1, 9).build();
    mcast_mac[0..6].copy_from_slice(&[0x33, 0x33, 0, 0, 0, 1]);
    let cases: Vec<(&str, u8, Vec<u8>)> = vec![
        (
            "ICMP error",
            reject::DEFAULT,
            Frame::ipv4(A4, B4)
                .l4(L4::Icmp { ty: 3, code: 1 })
                .payload(28)
                .build(),
        ),
        (
            "ICMP time exceeded",
            reject::DEFAULT,
            Frame::ipv4(A4, B4).l4(L4::Icmp { ty: 11, code: 0 }).build(),
        ),
        (
            "ICMP type 40",
            reject::DEFAULT,
            Frame::ipv4(A4, B4).l4(L4::Icmp { ty: 40, code: 0 }).build(),
        ),
        (
            "ICMPv6 error",
            reject::DEFAULT,
            Frame::ipv6(A6, B6)
                .l4(L4::Icmpv6 { ty: 1, code: 4 })
                .payload(48)
                .build(),
        ),
        (
            "ICMPv6 redirect",
            reject::DEFAULT,
            Frame::ipv6(A6, B6)
                .l4(L4::Icmpv6 { ty: 137, code: 0 })
                .build(),
        ),
        (
            "TCP RST",
            reject::TCP_RESET,
            Frame::ipv4(A4, B4).tcp(1, 80, 0x04).build(),
        ),
        (
            "TCP RST+ACK",
            reject::DEFAULT,
            Frame::ipv6(A6, B6).tcp(1, 80, 0x14).build(),
        ),
        ("broadcast MAC", reject::DEFAULT, bcast),
        ("multicast MAC", reject::DEFAULT, mcast_mac),
        (
            "IPv4 limited broadcast",
            reject::DEFAULT,
            Frame::ipv4(A4, Ipv4Addr::BROADCAST).udp(1, 9).build(),
        ),
        (
            "IPv4 multicast",
            reject::DEFAULT,
            Frame::ipv4(A4, Ipv4Addr::new(224, 0, 0, 251))
                .udp(1, 9)
                .build(),
        ),
        (
            "IPv4 source 0",
            reject::DEFAULT,
            Frame::ipv4(Ipv4Addr::UNSPECIFIED, B4).udp(68, 67).build(),
        ),
        (
            "IPv6 multicast",
            reject::DEFAULT,
            Frame::ipv6(A6, "ff02::fb".parse().unwrap())
                .udp(1, 9)
                .build(),
        ),
        (
            "IPv6 source ::",
            reject::DEFAULT,
            Frame::ipv6(Ipv6Addr::UNSPECIFIED, B6).udp(1, 9).build(),
        ),
        (
            "later fragment",
            reject::DEFAULT,
            Frame::ipv4(A4, B4)
                .ipv4_frag(10, false)
                .udp(1, 9)
                .payload(16)
                .build(),
        ),
        (
            "tcp-reset on UDP",
            reject::TCP_RESET,
            Frame::ipv4(A4, B4).udp(1, 9).build(),
        ),
        (
            "icmp6 type on IPv4",
            reject::ICMP6_ADM_PROHIBITED,
            Frame::ipv4(A4, B4).udp(1, 9).build(),
        ),
        (
            "icmp type on IPv6",
            reject::ICMP_HOST_PROHIBITED,
            Frame::ipv6(A6, B6).udp(1, 9).build(),
        ),
        (
            "unknown type",
            reject::UNKNOWN,
            Frame::ipv4(A4, B4).udp(1, 9).build(),
        ),
    ];
    let mut n = 0;
    for (name, rtype, frame) in cases {
        dp.set_action_reject(1, rtype, false).unwrap();
        for hook in [AttachPoint::Xdp, AttachPoint::Tc] {
            let (rc, _) = run(&dp, hook, &frame);
            assert_eq!(rc, drop_code(hook), "{name} at {hook:?}: must only drop");
            n += 1;
        }
    }
    let st = dp.stats().unwrap();
    assert_eq!(st.get(Stat::RejectNoReply), n);
    assert_eq!(st.get(Stat::RejectSent), 0);
    // ... while an ICMP echo request is answered
    dp.set_action_reject(1, reject::DEFAULT, false).unwrap();
    let echo = Frame::ipv6(A6, B6)
        .l4(L4::Icmpv6 { ty: 128, code: 0 })
        .build();
    assert_eq!(run(&dp, AttachPoint::Tc, &echo).0, TC_ACT_REDIRECT);
}

#[test]
#[ignore = "needs root"]
fn answers_are_rate_limited() {
    let mut dp = load("answers_are_rate_limited");
    dp.set_action_reject(1, reject::DEFAULT, false).unwrap();
    let f = Frame::ipv4(A4, B4).udp(1, 9).build();
    // 10/s with a burst of 5: a 1,000-packet flood gets the burst and at
    // most the refill of the time it took; the rest are dropped. (One run
    // per packet: a repeated run would see its own answer next time.)
    dp.set_reject_rate(10, 5).unwrap();
    let t0 = std::time::Instant::now();
    for i in 0..1000 {
        let hook = if i % 2 == 0 {
            AttachPoint::Xdp
        } else {
            AttachPoint::Tc
        };
        dp.test_run(hook, &f, 0, 1).unwrap();
    }
    let refill = (t0.elapsed().as_secs_f64() * 10.0).ceil() as u64;
    let st = dp.stats().unwrap();
    let sent = st.get(Stat::RejectSent);
    assert!(
        (5..=5 + refill).contains(&sent),
        "sent {sent}, want 5..={}",
        5 + refill
    );
    assert_eq!(sent + st.get(Stat::RejectLimited), 1000);
    // rate 0: never answer
    dp.set_reject_rate(0, 1).unwrap();
    assert_eq!(run(&dp, AttachPoint::Tc, &f).0, TC_ACT_SHOT);
    assert_eq!(dp.stats().unwrap().get(Stat::RejectSent), sent);
}

#[test]
#[ignore = "needs root"]
fn a_compiled_image_carries_the_reject_type() {
    let mut dp = load("a_compiled_image_carries_the_reject_type");
    let text = "*filter\n:INPUT ACCEPT [0:0]\n\
        -A INPUT -p tcp --dport 80 -j REJECT --reject-with tcp-reset\n\
        -A INPUT -p udp --dport 9 -j REJECT --reject-with icmp-host-prohibited\n\
        -A INPUT -p udp --dport 10 -j REJECT\n\
        COMMIT\n";
    dp.write_image(&iptables_image(text)).unwrap();
    dp.swap().unwrap();
    // the interim classifier would answer differently: only the image can pass
    dp.set_action_reject(1, reject::ICMP_NET_UNREACHABLE, false)
        .unwrap();
    let syn = with_seq(Frame::ipv4(A4, B4).tcp(1, 80, 0x02).build(), 10, 0);
    let udp9 = Frame::ipv4(A4, B4).udp(1, 9).build();
    let udp10 = Frame::ipv4(A4, B4).udp(1, 10).payload(30).build();
    for hook in [AttachPoint::Xdp, AttachPoint::Tc] {
        assert_eq!(run(&dp, hook, &syn).1, expected(&syn, Want::Rst));
        assert!(dp.last_decision().unwrap().unwrap().by_image);
        assert_eq!(run(&dp, hook, &udp9).1, expected(&udp9, Want::Icmp(3, 10)));
        assert_eq!(run(&dp, hook, &udp10).1, expected(&udp10, Want::Icmp(3, 3)));
    }
    assert_eq!(
        parapet_image::reject::reject_code(Some("tcp-reset")),
        u32::from(reject::TCP_RESET)
    );
}

/// `install_actions` (the path `parapet run` and parapetd share) gives the
/// interim classifier's REJECT rules their `--reject-with` type, the same
/// one the image carries.
#[test]
#[ignore = "needs root"]
fn installed_actions_carry_the_reject_type() {
    let mut dp = load("installed_actions_carry_the_reject_type");
    let text = "*filter\n:INPUT ACCEPT [0:0]\n\
        -A INPUT -p tcp --dport 80 -j REJECT --reject-with tcp-reset\n\
        -A INPUT -p udp --dport 9 -j REJECT --reject-with icmp-host-prohibited\n\
        -A INPUT -p udp --dport 10 -j REJECT\n\
        COMMIT\n";
    let rs = parapet_parse::parse(text, "test", parapet_parse::Format::IptablesSave)
        .unwrap()
        .ruleset;
    dp.install_actions(&rs, &parapet_model::Verdict::Accept, 10)
        .unwrap();
    // no image: the interim classifier decides, by protocol and port
    assert_eq!(dp.generation(), 0);
    let ids: Vec<u32> = rs.rules().map(|r| r.id).collect();
    dp.set_lite_rule(6, 80, ids[0]).unwrap();
    dp.set_lite_rule(17, 9, ids[1]).unwrap();
    dp.set_lite_rule(17, 10, ids[2]).unwrap();
    let syn = with_seq(Frame::ipv4(A4, B4).tcp(1, 80, 0x02).build(), 10, 0);
    let udp9 = Frame::ipv4(A4, B4).udp(1, 9).build();
    let udp10 = Frame::ipv4(A4, B4).udp(1, 10).payload(30).build();
    for hook in [AttachPoint::Xdp, AttachPoint::Tc] {
        assert_eq!(run(&dp, hook, &syn).1, expected(&syn, Want::Rst));
        assert!(!dp.last_decision().unwrap().unwrap().by_image);
        assert_eq!(run(&dp, hook, &udp9).1, expected(&udp9, Want::Icmp(3, 10)));
        assert_eq!(run(&dp, hook, &udp10).1, expected(&udp10, Want::Icmp(3, 3)));
    }
}
