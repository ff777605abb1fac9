//! Sets in the kernel: random rulesets with set references (parapet-gen),
//! random sets in a `parapet_sets::SetStore` (IPv4 and IPv6 prefixes and
//! ranges, nested, an addr . port concatenation with ranges, an exact
//! addr . proto . port set, a port set, an interface-name set), loaded into
//! the BPF maps with `Dataplane::install_sets`, plus expired elements
//! written to the kernel only. For every packet, the set bits the kernel
//! computed must equal the store's membership (the reference), and the
//! kernel's decision must equal `DecisionList::classify` with those bits.

mod common;

use common::image::set_membership_image;
use common::wire::{frame_of, wire_packet};
use common::{load_dataplane, Rng};
use parapet_compile::{compile, Backend, CompileOptions};
use parapet_dataplane::frame::{Frame, L4};
use parapet_dataplane::{
    monotonic_ns, AttachPoint, KernelVerdict, LoadOptions, SetDim, SetElement,
};
use parapet_gen::{packets_for, random_ruleset, RandomSpec};
use parapet_model::{flatten, Dir, Family, Field, Packet, SetKeySpec, SetRef};
use parapet_sets::{Element, KeyPart, KeyValue, LookupKey, SetDesc, SetStore};

use common::lo::LO;

/// The reference: the packet's key for `r` built as the CLI's offline
/// bridge builds it, looked up in the store.
fn member(store: &SetStore, r: &SetRef, p: &Packet) -> bool {
    let dims = store.key_dims(&r.name);
    if dims.is_empty() {
        return false;
    }
    let addr = |part: KeyPart, a: u128| -> Option<KeyValue> {
        let family = match (part, p.family) {
            (KeyPart::Ipv4Addr, Family::V4) => parapet_sets::Family::V4,
            (KeyPart::Ipv6Addr, Family::V6) => parapet_sets::Family::V6,
            _ => return None,
        };
        Some(KeyValue::Addr { family, addr: a })
    };
    let mut key = LookupKey::new();
    for (i, &part) in dims.iter().enumerate() {
        let v = match &r.key {
            SetKeySpec::Flags(dirs) => {
                let Some(&dir) = dirs.get(i).or(dirs.last()) else {
                    return false;
                };
                let src = dir == Dir::Src;
                match part {
                    KeyPart::Ipv4Addr | KeyPart::Ipv6Addr => {
                        addr(part, if src { p.src } else { p.dst })
                    }
                    KeyPart::InetService => {
                        Some(KeyValue::Port(if src { p.sport } else { p.dport }))
                    }
                    KeyPart::InetProto => Some(KeyValue::Proto(p.proto)),
                    KeyPart::IfName => Some(KeyValue::Iface(
                        (if src { p.iif } else { p.oif }).0.to_be_bytes(),
                    )),
                    KeyPart::EtherAddr | KeyPart::Mark => None,
                }
            }
            SetKeySpec::Fields(fields) => match (part, fields.get(i)) {
                (KeyPart::Ipv4Addr | KeyPart::Ipv6Addr, Some(Field::SrcAddr)) => addr(part, p.src),
                (KeyPart::Ipv4Addr | KeyPart::Ipv6Addr, Some(Field::DstAddr)) => addr(part, p.dst),
                (KeyPart::InetService, Some(Field::SrcPort)) => Some(KeyValue::Port(p.sport)),
                (KeyPart::InetService, Some(Field::DstPort)) => Some(KeyValue::Port(p.dport)),
                (KeyPart::InetProto, Some(Field::Proto)) => Some(KeyValue::Proto(p.proto)),
                (KeyPart::IfName, Some(Field::InIface)) => {
                    Some(KeyValue::Iface(p.iif.0.to_be_bytes()))
                }
                _ => None,
            },
        };
        let Some(v) = v else { return false };
        key = key.push(v);
    }
    store.lookup(&r.name, &key).unwrap_or(false)
}

fn verdict(v: &parapet_model::Verdict) -> KernelVerdict {
    match v {
        parapet_model::Verdict::Accept => KernelVerdict::Accept,
        parapet_model::Verdict::Drop => KernelVerdict::Drop,
        parapet_model::Verdict::Reject { .. } => KernelVerdict::Reject,
    }
}

fn prefix(v: u128, len: u32, bits: u32) -> (u128, u128) {
    let host = if bits - len >= 128 {
        u128::MAX
    } else {
        (1u128 << (bits - len)) - 1
    };
    let lo = v
        & !host
        & if bits == 128 {
            u128::MAX
        } else {
            (1u128 << bits) - 1
        };
    (lo, lo | host)
}

fn name(s: &str) -> u128 {
    let mut b = [0u8; 16];
    b[..s.len()].copy_from_slice(s.as_bytes());
    u128::from_be_bytes(b)
}

/// The store's sets and the references of the test rulesets.
fn refs() -> Vec<SetRef> {
    let r = |name: &str, key: SetKeySpec| SetRef {
        name: name.into(),
        key,
    };
    vec![
        r("s4", SetKeySpec::Flags(vec![Dir::Src])),
        r("s6", SetKeySpec::Flags(vec![Dir::Dst])),
        r(
            "ap",
            SetKeySpec::Fields(vec![Field::SrcAddr, Field::DstPort]),
        ),
        r("ipp", SetKeySpec::Flags(vec![Dir::Src, Dir::Dst])),
        r("ports", SetKeySpec::Fields(vec![Field::DstPort])),
        r("ifs", SetKeySpec::Fields(vec![Field::InIface])),
        r("s4", SetKeySpec::Flags(vec![Dir::Dst])),
        r("missing", SetKeySpec::Flags(vec![Dir::Src])),
    ]
}

fn new_store() -> SetStore {
    let mut st = SetStore::new();
    let hour = 3_600_000;
    st.create(
        "s4",
        SetDesc::new(&[KeyPart::Ipv4Addr]).interval().timeouts(0),
    )
    .unwrap();
    st.create(
        "s6",
        SetDesc::new(&[KeyPart::Ipv6Addr]).interval().timeouts(hour),
    )
    .unwrap();
    st.create(
        "ap",
        SetDesc::new(&[KeyPart::Ipv4Addr, KeyPart::InetService])
            .interval()
            .timeouts(0),
    )
    .unwrap();
    st.create(
        "ipp",
        SetDesc::new(&[KeyPart::Ipv4Addr, KeyPart::InetProto, KeyPart::InetService]).timeouts(0),
    )
    .unwrap();
    st.create("ports", SetDesc::new(&[KeyPart::InetService]).interval())
        .unwrap();
    st.create("ifs", SetDesc::new(&[KeyPart::IfName]).interval())
        .unwrap();
    st
}

/// Elements around the packets' own values (so they hit), nested and
/// overlapping, plus boundary probes (each element's ends and their
/// neighbours) appended to `probes`.
fn fill(st: &mut SetStore, rng: &mut Rng, pkts: &[Packet], probes: &mut Vec<Packet>) {
    let hour = 3_600_000;
    let el = |r: &[(u128, u128)], timed: bool| {
        let e = Element::new(r);
        if timed {
            e.with_timeout(hour)
        } else {
            e
        }
    };
    for p in pkts {
        let timed = rng.chance(30);
        match p.family {
            Family::V4 => {
                if rng.chance(40) {
                    let len = 8 + rng.below(25) as u32;
                    let (lo, hi) = prefix(p.src, len, 32);
                    let r = if rng.chance(30) {
                        // a range that is no prefix
                        let a = lo.saturating_sub(rng.below(1000) as u128);
                        (a, (hi + rng.below(1000) as u128).min(0xffff_ffff))
                    } else {
                        (lo, hi)
                    };
                    st.add("s4", &el(&[r], timed)).unwrap();
                    for v in [r.0.wrapping_sub(1), r.0, r.1, r.1 + 1] {
                        if v <= 0xffff_ffff {
                            probes.push(Packet {
                                src: v,
                                ..p.clone()
                            });
                            probes.push(Packet {
                                dst: v,
                                ..p.clone()
                            });
                        }
                    }
                }
                if rng.chance(30) {
                    let (lo, hi) = prefix(p.src, 16 + rng.below(17) as u32, 32);
                    let port = u128::from(p.dport);
                    let pr = (
                        port.saturating_sub(rng.below(3) as u128),
                        (port + rng.below(40) as u128).min(65535),
                    );
                    st.add("ap", &el(&[(lo, hi), pr], timed)).unwrap();
                    probes.push(Packet {
                        dport: pr.1 as u16,
                        ..p.clone()
                    });
                    probes.push(Packet {
                        dport: (pr.1 as u16).wrapping_add(1),
                        ..p.clone()
                    });
                    if hi < 0xffff_ffff {
                        probes.push(Packet {
                            src: hi + 1,
                            ..p.clone()
                        });
                    }
                }
                if rng.chance(30) {
                    let v = [p.src, u128::from(p.proto), u128::from(p.dport)];
                    st.add(
                        "ipp",
                        &el(&[(v[0], v[0]), (v[1], v[1]), (v[2], v[2])], timed),
                    )
                    .unwrap();
                    probes.push(Packet {
                        dport: p.dport.wrapping_add(1),
                        ..p.clone()
                    });
                }
            }
            Family::V6 => {
                if rng.chance(50) {
                    let len = 16 + rng.below(113) as u32;
                    let (lo, hi) = prefix(p.dst, len, 128);
                    st.add("s6", &el(&[(lo, hi)], timed)).unwrap();
                    for v in [lo.wrapping_sub(1), lo, hi, hi.wrapping_add(1)] {
                        probes.push(Packet {
                            dst: v,
                            ..p.clone()
                        });
                    }
                }
            }
        }
        if rng.chance(10) {
            let port = u128::from(p.dport);
            let r = (port, (port + rng.below(300) as u128).min(65535));
            st.add("ports", &el(&[r], false)).unwrap();
            probes.push(Packet {
                dport: (r.1 as u16).wrapping_add(1),
                ..p.clone()
            });
        }
    }
    // Interfaces: the wire packets arrive on "lo".
    match rng.below(3) {
        0 => st
            .add("ifs", &el(&[(name("lo"), name("lo"))], false))
            .unwrap(),
        1 => {
            let (lo, hi) = prefix(name("l"), 8, 128);
            st.add("ifs", &el(&[(lo, hi)], false)).unwrap()
        }
        _ => st
            .add("ifs", &el(&[(name("eth0"), name("eth0"))], false))
            .unwrap(),
    };
    // Wide, nested elements.
    st.add("s4", &el(&[prefix(0x0a00_0000, 8, 32)], false))
        .unwrap();
    st.add("s4", &el(&[prefix(0x0a0a_0000, 16, 32)], true))
        .unwrap();
}

#[test]
#[ignore = "needs root"]
fn kernel_set_bits_and_decisions_equal_the_store() {
    let test = "kernel_set_bits_and_decisions_equal_the_store";
    let mut dp = common::lo::dp_on_lo(test);
    let mut checked = 0usize;
    let mut hits = [0usize; 8];
    let mut by_rule = 0usize;
    let mut expired_probes = 0usize;
    for seed in 0..6u64 {
        let mut rng = Rng::new(seed + 11);
        let spec = RandomSpec {
            rules: 30 + (seed as usize * 41) % 120,
            ipv6: seed % 2 == 1,
            set_refs: 8,
            ..RandomSpec::default()
        };
        let mut rs = random_ruleset(seed, &spec);
        rs.set_refs = refs();
        let list = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
        let base: Vec<Packet> = packets_for(&rs, seed, 150)
            .into_iter()
            .map(wire_packet)
            .collect();
        let mut store = new_store();
        let mut probes = Vec::new();
        fill(&mut store, &mut rng, &base, &mut probes);
        let ids = dp.install_sets(&rs.set_refs, &store).unwrap();

        // Expired elements, in the kernel only: they must never match,
        // and must not hide a live enclosing prefix.
        let past = monotonic_ns() - 1;
        let mut expired = Vec::new();
        // (Adding an element the set holds refreshes it: leave those out,
        // the store would not see the change.)
        let s4 = store.get("s4").unwrap();
        let fresh = |r: (u128, u128)| !s4.has_element(&Element::new(&[r]), store.now());
        for p in base.iter().filter(|p| p.family == Family::V4).take(10) {
            for r in [(p.src, p.src), prefix(p.src, 20, 32)] {
                if fresh(r) {
                    expired.push(SetElement::new(&[r]).expires(past));
                }
            }
            probes.push(p.clone());
            expired_probes += 1;
        }
        if fresh((0, 0xffff_ffff)) {
            expired.push(SetElement::new(&[(0, 0xffff_ffff)]).expires(past));
        }
        dp.set_add(ids["s4"], &expired).unwrap();
        dp.set_add(
            ids["ap"],
            &[SetElement::new(&[(0, 0xffff_ffff), (0, 65535)]).expires(past)],
        )
        .unwrap();
        dp.set_add(
            ids["s6"],
            &[SetElement::new(&[(0, u128::MAX)]).expires(past)],
        )
        .unwrap();

        for backend in [Backend::Linear, Backend::Tree] {
            let opts = CompileOptions {
                backend,
                ..CompileOptions::default()
            };
            let (image, _) = compile(&list, &opts).unwrap();
            dp.write_image(&image.to_bytes()).unwrap();
            dp.swap().unwrap();
            for (i, p) in base.iter().chain(&probes).enumerate() {
                let p = wire_packet(p.clone());
                let bits: Vec<bool> = rs.set_refs.iter().map(|r| member(&store, r, &p)).collect();
                let want_bits = bits
                    .iter()
                    .enumerate()
                    .fold(0u64, |a, (n, &b)| a | (u64::from(b) << n));
                let frame = frame_of(&p);
                let hook = if i % 2 == 0 {
                    AttachPoint::Xdp
                } else {
                    AttachPoint::Tc
                };
                dp.test_run(hook, &frame, LO, 1).unwrap();
                let got = dp.last_decision().unwrap().unwrap();
                assert!(got.by_image, "seed {seed}: walker error {}", got.walk_err);
                assert_eq!(
                    got.set_bits, want_bits,
                    "seed {seed} {backend:?} packet {i} at {hook:?}: set bits {:#b} want {:#b} for {p:?}",
                    got.set_bits, want_bits
                );
                let want = list.classify(&p, &bits);
                let mut nonterm = want.nonterminal.clone();
                nonterm.truncate(16);
                assert_eq!(
                    (got.rule_id, got.verdict, got.nonterminal),
                    (want.rule_id, verdict(&want.verdict), nonterm),
                    "seed {seed} {backend:?} packet {i}: {p:?}"
                );
                for (n, &b) in bits.iter().enumerate() {
                    hits[n] += usize::from(b);
                }
                by_rule += usize::from(want.rule_id != 0);
                checked += 1;
            }
        }
    }
    // Later seeds replaced the sets in place (same names and types).
    // An image without references: after its swap every set is unused.
    dp.install_sets(&[], &new_store()).unwrap();
    dp.write_image(&set_membership_image(0, 0)).unwrap();
    dp.swap().unwrap();
    assert_eq!(dp.destroy_unused_sets().unwrap(), vec![0, 1, 2, 3, 4, 5]);
    println!("{checked} packets, member hits per reference {hits:?}, {by_rule} decided by a rule, {expired_probes} expired probes");
    for (n, &h) in hits.iter().enumerate().take(7) {
        assert!(h > 0, "reference {n} never matched: the test is vacuous");
    }
    assert_eq!(hits[7], 0, "a reference to a missing set matched");
}

fn v4_frame(src: u32, dst: u32, dport: u16) -> Vec<u8> {
    Frame::ipv4(src.into(), dst.into())
        .l4(L4::Udp { sport: 1000, dport })
        .build()
}

#[test]
#[ignore = "needs root"]
fn expired_elements_never_match_and_prefix_ends_are_exact() {
    let test = "expired_elements_never_match_and_prefix_ends_are_exact";
    let mut dp = load_dataplane(
        test,
        &LoadOptions {
            debug: true,
            ..LoadOptions::default()
        },
    );
    let now = monotonic_ns();
    let (past, soon) = (now - 1, now + 1_500_000_000);
    dp.create_set(0, &[SetDim::Ipv4Addr]).unwrap();
    dp.create_set(1, &[SetDim::Ipv4Addr, SetDim::Port]).unwrap();
    dp.set_add(
        0,
        &[
            SetElement::new(&[prefix(0x0a00_0000, 8, 32)]), // 10/8 live
            SetElement::new(&[prefix(0x0a01_0000, 16, 32)]).expires(past), // 10.1/16 expired
            SetElement::new(&[prefix(0x0a01_0200, 24, 32)]).expires(soon), // 10.1.2/24 1.5 s
            SetElement::new(&[prefix(0xc0a8_0000, 16, 32)]).expires(past), // 192.168/16 expired
            SetElement::new(&[(0xc0a8_0105, 0xc0a8_0105)]), // 192.168.1.5 live
            SetElement::new(&[(0xac10_0003, 0xac10_0011)]), // 172.16.0.3-17 range
        ],
    )
    .unwrap();
    dp.set_add(
        1,
        &[
            SetElement::new(&[prefix(0x0b00_0000, 8, 32), (100, 199)]),
            SetElement::new(&[prefix(0x0b00_0000, 16, 32), (200, 200)]).expires(past),
        ],
    )
    .unwrap();
    dp.define_set_ref(0, 0, &[parapet_dataplane::PacketPart::SrcAddr])
        .unwrap();
    dp.define_set_ref(
        1,
        1,
        &[
            parapet_dataplane::PacketPart::SrcAddr,
            parapet_dataplane::PacketPart::DstPort,
        ],
    )
    .unwrap();
    dp.write_image(&set_membership_image(2, 2)).unwrap();
    dp.swap().unwrap();
    let bits = |dp: &parapet_dataplane::Dataplane, src: u32, dport: u16| {
        let f = v4_frame(src, 0x0102_0304, dport);
        dp.test_run(AttachPoint::Xdp, &f, 0, 1).unwrap();
        dp.last_decision().unwrap().unwrap().set_bits
    };
    let cases: &[(u32, u16, u64)] = &[
        (0x09ff_ffff, 1, 0), // below 10/8
        (0x0a00_0000, 1, 1), // 10/8 first
        (0x0aff_ffff, 1, 1), // 10/8 last
        (0x0b00_0000, 1, 0), // above 10/8, port outside 100-199
        (0x0a01_0001, 1, 1), // in expired 10.1/16 but in live 10/8
        (0x0a01_0203, 1, 1), // in 10.1.2/24 (not yet expired)
        (0xc0a8_0001, 1, 0), // expired 192.168/16 only
        (0xc0a8_0105, 1, 1), // live /32 inside an expired /16
        (0xc0a8_0104, 1, 0),
        (0xc0a8_0106, 1, 0),
        (0xac10_0002, 1, 0), // range ends ±1
        (0xac10_0003, 1, 1),
        (0xac10_0011, 1, 1),
        (0xac10_0012, 1, 0),
        (0x0b00_0001, 99, 0), // addr . port: port ends ±1
        (0x0b00_0001, 100, 2),
        (0x0b00_0001, 199, 2),
        (0x0b00_0001, 200, 0), // only the expired element
        (0x0bff_ffff, 150, 2),
        (0x0c00_0000, 150, 0),
    ];
    for &(src, port, want) in cases {
        assert_eq!(bits(&dp, src, port), want, "src {src:#x} dport {port}");
    }
    // The decision follows: members of reference 0 are dropped by rule 1.
    let f = v4_frame(0x0a00_0001, 0x0102_0304, 1);
    assert!(!dp.test_run(AttachPoint::Tc, &f, 0, 1).unwrap().passed);
    assert_eq!(dp.last_decision().unwrap().unwrap().rule_id, 1);
    // 10.1.2/24 expires in the kernel on its own; 10/8 still holds it.
    // 172.16.0.3-17 is deleted: gone at once.
    std::thread::sleep(std::time::Duration::from_millis(1600));
    dp.set_del(0, &[SetElement::new(&[(0xac10_0003, 0xac10_0011)])])
        .unwrap();
    dp.set_del(0, &[SetElement::new(&[prefix(0x0a00_0000, 8, 32)])])
        .unwrap();
    assert_eq!(bits(&dp, 0x0a01_0203, 1), 0, "expired /24, deleted /8");
    assert_eq!(bits(&dp, 0xac10_0005, 1), 0, "deleted range");
    assert_eq!(bits(&dp, 0xc0a8_0105, 1), 1);
    // Refreshing an expired element brings it back.
    dp.set_add(0, &[SetElement::new(&[prefix(0xc0a8_0000, 16, 32)])])
        .unwrap();
    assert_eq!(bits(&dp, 0xc0a8_0001, 1), 1, "refreshed /16");
    dp.set_flush(0).unwrap();
    dp.set_flush(1).unwrap();
    assert_eq!(bits(&dp, 0xc0a8_0105, 150), 0);
    assert_eq!(bits(&dp, 0x0b00_0001, 150), 0);
    assert_eq!(dp.set_entries(0).unwrap() + dp.set_entries(1).unwrap(), 0);
    // An IPv6 packet is never a member of an IPv4 set.
    dp.set_add(0, &[SetElement::new(&[(0, 0xffff_ffff)])])
        .unwrap();
    let f6 = Frame::ipv6("::a00:1".parse().unwrap(), "::1".parse().unwrap())
        .l4(L4::Udp { sport: 1, dport: 2 })
        .build();
    dp.test_run(AttachPoint::Xdp, &f6, 0, 1).unwrap();
    assert_eq!(dp.last_decision().unwrap().unwrap().set_bits, 0);
    assert_eq!(bits(&dp, 0x0a00_0001, 1), 1);
}

/// A list:set reference has no kernel form yet: installing it is an error
/// that names it, not a reference that silently matches nothing.
#[test]
#[ignore = "needs root"]
fn a_list_set_reference_is_refused_by_name() {
    let test = "a_list_set_reference_is_refused_by_name";
    let mut dp = load_dataplane(test, &LoadOptions::default());
    let mut store = SetStore::new();
    store
        .load_ipset("create a hash:ip family inet\nadd a 10.0.0.1\ncreate l list:set\nadd l a\n")
        .unwrap();
    let direct = SetRef {
        name: "a".into(),
        key: SetKeySpec::Flags(vec![Dir::Src]),
    };
    dp.install_sets(std::slice::from_ref(&direct), &store)
        .unwrap();
    let list = SetRef {
        name: "l".into(),
        ..direct
    };
    let e = dp.install_sets(&[list], &store).unwrap_err();
    assert!(
        e.to_string().contains("set 'l' is an ipset list:set"),
        "{e:#}"
    );
}
