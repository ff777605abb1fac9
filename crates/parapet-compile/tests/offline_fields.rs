//! Fields the packet key has no word for yet (the conntrack entry's
//! original source port, `--ctorigsrcport`, and its addresses), and address types beyond the host's `local` table:
//! compiling a rule on one is refused with the rule and the field named,
//! never built as if every packet matched it. The packet and address types,
//! which every hook fills, the socket owner (key words 42, 43), TCP
//! options (words 44..=51) and `-m string` (the pattern hits, words
//! 52..=55) compile.

mod common;

use common::configs;
use parapet_compile::{compile, Classifier, CompileOptions};
use parapet_image::KeyWords;
use parapet_model::*;

#[test]
fn the_original_source_port_is_refused_by_the_compiler() {
    let mut m = Matches::any();
    m.constrain(Field::CtOrigSrcPort, IntervalSet::point(68));
    let rs = parapet_gen::one_chain(
        vec![Rule::new(1, m, Action::Verdict(Verdict::Accept))],
        Verdict::Drop,
    );
    let list = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
    let e = compile(&list, &CompileOptions::default()).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("rule 1") && msg.contains("original source port"),
        "{msg}"
    );
}

/// The conntrack entry's addresses (`--ctorigsrc` … `--ctrepldst`, `ct
/// original|reply ip saddr|daddr`): no key word, refused with the rule
/// and the address named.
#[test]
fn the_entrys_addresses_are_refused_by_the_compiler() {
    for (field, what) in [
        (Field::CtOrigSrc, "original source address (--ctorigsrc"),
        (
            Field::CtOrigDst,
            "original destination address (--ctorigdst",
        ),
        (
            Field::CtReplSrc,
            "reply source address (--ctreplsrc, ct reply ip|ip6 saddr",
        ),
        (
            Field::CtReplDst,
            "reply destination address (--ctrepldst, ct reply ip|ip6 daddr",
        ),
    ] {
        let msg = compile(
            &one_rule_list(field, 0x0a00_0001),
            &CompileOptions::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(msg.contains("rule 1") && msg.contains(what), "{msg}");
    }
}

/// `-m tcp --tcp-option N` (`Field::TcpOption`) compiles to a masked test
/// of one bit of the option bitmaps (key words 44..=51), in both senses
/// and at both ends of each half (kinds 0, 127, 128, 255); every engine
/// and the image walk decide as the decision list does, and the image
/// says it reads TCP options (the header flag the dataplane walks the
/// option area on). Random rulesets and option areas: `tcp_options.rs`.
#[test]
fn tcp_options_compile_in_every_engine() {
    let rule = |id: u32, tests: &[(u8, bool)], v: Verdict| {
        let mut m = Matches::any();
        m.constrain(Field::Proto, IntervalSet::point(6));
        for &(kind, want) in tests {
            m.constrain(Field::TcpOption(kind), IntervalSet::point(want as u128));
        }
        Rule::new(id, m, Action::Verdict(v))
    };
    let rs = parapet_gen::one_chain(
        vec![
            rule(1, &[(255, true), (0, false)], Verdict::Drop),
            rule(2, &[(128, true), (127, true)], Verdict::Accept),
            rule(3, &[(1, false)], Verdict::Drop),
            rule(4, &[(0, true)], Verdict::Accept),
        ],
        Verdict::Drop,
    );
    let list = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
    // (option area, the deciding rule: 0 the policy)
    let cases: [(&[u8], u32); 8] = [
        (&[255, 2, 1, 1], 1),
        (&[255, 2, 0, 0], 3), // 0 read: not rule 1; no NOP: rule 3
        (&[1, 255, 2, 0], 4), // 0 read, NOP read: rule 4
        (&[128, 2, 127, 2], 2),
        (&[127, 4, 128, 2], 3), // 128 inside 127's body: not read
        (&[2, 4, 5, 0xb4], 3),
        (&[1, 1, 1, 1], 0),
        (&[], 3),
    ];
    for (name, opts) in configs() {
        let c = Classifier::build(&list, &opts).unwrap();
        let flags = c.image().words()[parapet_image::hw::FLAGS];
        assert_ne!(flags & parapet_image::FLAG_TCP_OPTIONS, 0, "{name}");
        for &(area, want) in &cases {
            let mut p = Packet::v4(0x0a00_0001, 0x0a00_0002, 6, 1000, 22);
            p.tcp_options = (!area.is_empty()).then(|| area.into());
            let d = list.classify(&p, &[]);
            let id = if d.rule_id <= 4 { d.rule_id } else { 0 };
            assert_eq!(id, want, "list: {area:?}");
            assert_eq!(c.classify(&p, &[]), d, "{name}: {area:?}");
            let k = KeyWords::from_bits(&p, &[]);
            assert_eq!(c.walker().decide(&k), d, "{name} image walk: {area:?}");
        }
    }
    // an image without option tests does not ask for the walk
    let plain = Classifier::build(&one_rule_list(Field::DstPort, 22), &Default::default()).unwrap();
    assert_eq!(
        plain.image().words()[parapet_image::hw::FLAGS] & parapet_image::FLAG_TCP_OPTIONS,
        0
    );
}

fn string(
    pattern: &[u8],
    from: u16,
    to: u16,
    icase: bool,
    invert: bool,
) -> string_match::StringMatch {
    string_match::StringMatch {
        pattern: pattern.to_vec(),
        algo: string_match::StringAlgo::Bm,
        from,
        to,
        icase,
        invert,
    }
}

/// `-m string` (`Matches::payload`) compiles to a masked test of the
/// pattern hits (image version 12): two strings in one rule, `!`, a
/// search repeated by another rule (one row), `--icase` and a rule that
/// wants one search both found and not (never matches); every engine
/// decides as the linear engine on datagrams with and without the
/// patterns, and a packet without bytes holds none of them.
#[test]
fn string_matches_compile_to_pattern_hits() {
    let rule = |id: u32, ms: Vec<string_match::StringMatch>, v: Verdict| {
        let mut m = Matches::any();
        for s in ms {
            m.constrain_payload(s);
        }
        Rule::new(id, m, Action::Verdict(v))
    };
    let rs = parapet_gen::one_chain(
        vec![
            rule(
                1,
                vec![
                    string(b"ab", 0, 20, false, false),
                    string(b"ab", 0, 20, false, true),
                ],
                Verdict::Drop,
            ),
            rule(
                2,
                vec![
                    string(b"GET", 28, 40, true, false),
                    string(b"xx", 0, 65535, false, true),
                ],
                Verdict::Drop,
            ),
            rule(3, vec![string(b"ab", 0, 20, false, false)], Verdict::Accept),
            rule(
                4,
                vec![string(&[0xff], 0, 65535, true, false)],
                Verdict::Drop,
            ),
        ],
        Verdict::Accept,
    );
    let list = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
    let mut datagrams: Vec<Option<Vec<u8>>> = vec![None];
    for tail in [&b"get /"[..], b"GET xx", b"nothing", &[0xff], &[0xdf]] {
        let mut d = vec![0u8; 28];
        d.extend_from_slice(tail);
        datagrams.push(Some(d));
    }
    datagrams.push(Some(b"0123456789abcdefghijklmnopqrstuvw".to_vec()));
    datagrams.push(Some(b"0123456789012345678ab".to_vec()));
    for (name, opts) in configs() {
        let c = Classifier::build(&list, &opts).unwrap();
        let w = c.image().words();
        assert_ne!(
            w[parapet_image::hw::FLAGS] & parapet_image::FLAG_PATTERNS,
            0,
            "{name}"
        );
        // "ab" once though two rules search it, "GET", "xx", 0xff
        assert_eq!(w[parapet_image::hw::N_PATTERNS], 4, "{name}");
        let mut decided = std::collections::BTreeSet::new();
        for d in &datagrams {
            let mut p = Packet::v4(0x0a00_0001, 0x0a00_0002, 17, 1000, 53);
            p.datagram = d.clone().map(Vec::into_boxed_slice);
            let want = list.classify(&p, &[]);
            assert_ne!(want.rule_id, 1, "rule 1 never matches");
            assert_eq!(c.classify(&p, &[]), want, "{name}: {d:?}");
            decided.insert(want.rule_id);
        }
        assert_eq!(decided.into_iter().collect::<Vec<_>>(), [0, 2, 3, 4]);
    }
}

/// More distinct searches than the pattern hits' 128 bits: refused with
/// the rule named, never compiled as if it matched.
#[test]
fn too_many_distinct_strings_are_refused_by_the_compiler() {
    let rules = (0..129u32)
        .map(|i| {
            let mut m = Matches::any();
            m.constrain_payload(string(format!("p{i}").as_bytes(), 0, 65535, false, false));
            Rule::new(i + 1, m, Action::Verdict(Verdict::Drop))
        })
        .collect();
    let rs = parapet_gen::one_chain(rules, Verdict::Accept);
    let list = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
    let msg = compile(&list, &CompileOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("rule 129 has a -m string match past the image's 128"),
        "{msg}"
    );
}

fn one_rule_list(field: Field, value: u128) -> DecisionList {
    let mut m = Matches::any();
    m.constrain(field, IntervalSet::point(value));
    let rs = parapet_gen::one_chain(
        vec![Rule::new(1, m, Action::Verdict(Verdict::Accept))],
        Verdict::Drop,
    );
    flatten(&rs, rs.select_chain(None).unwrap()).unwrap()
}

/// A type set telling UNICAST from a route type the dataplane does not
/// mirror (IPv6 `--dst-type UNREACHABLE`, `--src-type BLACKHOLE`) is
/// refused; the kernel reads those from the whole routing table.
#[test]
fn address_types_beyond_the_local_table_are_refused_by_the_compiler() {
    for (field, t, what) in [
        (Field::SrcType, addr_type::BLACKHOLE, "source address type"),
        (
            Field::DstType,
            addr_type::UNREACHABLE,
            "destination address type",
        ),
        (
            Field::DstType,
            addr_type::UNICAST,
            "destination address type",
        ),
    ] {
        let list = one_rule_list(field, t as u128);
        let msg = compile(&list, &CompileOptions::default())
            .unwrap_err()
            .to_string();
        assert!(msg.contains("rule 1") && msg.contains(what), "{msg}");
    }
}

/// `--dst-type LOCAL -j ACCEPT`, `--src-type BROADCAST,MULTICAST -j DROP`,
/// `! --dst-type LOCAL,BROADCAST` (every unicast-like type) `-j DROP`,
/// policy ACCEPT: every engine and the image walk decide each pair of
/// address types as the decision list does, and the image says it reads
/// them (the header flag the dataplane types addresses on).
#[test]
fn the_address_types_compile_in_every_engine() {
    use addr_type::*;
    let set = |ts: &[u8]| {
        ts.iter().fold(IntervalSet::empty(), |s, &t| {
            s.union(&IntervalSet::point(t as u128))
        })
    };
    let rule = |id: u32, f: Field, s: IntervalSet, v: Verdict| {
        let mut m = Matches::any();
        m.constrain(f, s);
        Rule::new(id, m, Action::Verdict(v))
    };
    let rs = parapet_gen::one_chain(
        vec![
            rule(1, Field::DstType, set(&[LOCAL]), Verdict::Accept),
            rule(
                2,
                Field::SrcType,
                set(&[BROADCAST, MULTICAST]),
                Verdict::Drop,
            ),
            rule(
                3,
                Field::DstType,
                set(&[LOCAL, BROADCAST]).complement(0xf),
                Verdict::Drop,
            ),
        ],
        Verdict::Accept,
    );
    let list = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
    let types = [UNSPEC, UNICAST, LOCAL, BROADCAST, MULTICAST];
    for (name, opts) in configs() {
        let c = Classifier::build(&list, &opts).unwrap();
        let flags = c.image().words()[parapet_image::hw::FLAGS];
        assert_ne!(flags & parapet_image::FLAG_ADDR_TYPES, 0, "{name}");
        for &st in &types {
            for &dt in &types {
                let mut p = Packet::v4(0x0a00_0001, 0x0a00_0002, 17, 1000, 53);
                p.src_type = Some(st);
                p.dst_type = Some(dt);
                let d = list.classify(&p, &[]);
                let want = if dt == LOCAL {
                    1
                } else if st == BROADCAST || st == MULTICAST {
                    2
                } else if dt != BROADCAST {
                    3
                } else {
                    0
                };
                let id = if d.rule_id <= 3 { d.rule_id } else { 0 };
                assert_eq!(id, want, "list: {p}");
                assert_eq!(c.classify(&p, &[]), d, "{name}: {p}");
                let k = KeyWords::from_bits(&p, &[]);
                assert_eq!(c.walker().decide(&k), d, "{name} image walk: {p}");
            }
        }
    }
}

/// `-m pkttype --pkt-type broadcast -j DROP`, `-p udp -m pkttype !
/// --pkt-type unicast -j ACCEPT`, `-m pkttype --pkt-type unicast -j
/// ACCEPT`, policy DROP: every engine and the image walk decide each
/// packet type as the decision list does.
#[test]
fn the_packet_type_compiles_in_every_engine() {
    let rule = |id: u32, proto: Option<u128>, types: &[u128], v: Verdict| {
        let mut m = Matches::any();
        if let Some(p) = proto {
            m.constrain(Field::Proto, IntervalSet::point(p));
        }
        let mut set = IntervalSet::empty();
        for &t in types {
            set = set.union(&IntervalSet::point(t));
        }
        m.constrain(Field::PktType, set);
        Rule::new(id, m, Action::Verdict(v))
    };
    let rs = parapet_gen::one_chain(
        vec![
            rule(1, None, &[1], Verdict::Drop),
            rule(2, Some(17), &[1, 2, 3, 4, 5, 6, 7], Verdict::Accept),
            rule(3, None, &[0], Verdict::Accept),
        ],
        Verdict::Drop,
    );
    let list = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
    // (protocol, packet type) -> the deciding rule (0: the policy)
    let cases = [
        (6, 0, 3),
        (6, 1, 1),
        (6, 2, 0),
        (6, 3, 0),
        (17, 0, 3),
        (17, 1, 1),
        (17, 2, 2),
        (17, 3, 2),
    ];
    for (name, opts) in configs() {
        let c = Classifier::build(&list, &opts).unwrap();
        for &(proto, ty, want) in &cases {
            let mut p = Packet::v4(0x0a00_0001, 0x0a00_0002, proto, 1000, 53);
            p.pkt_type = Some(ty);
            let d = list.classify(&p, &[]);
            let id = if d.rule_id <= 3 { d.rule_id } else { 0 };
            assert_eq!(id, want, "list: {p}");
            assert_eq!(c.classify(&p, &[]), d, "{name}: {p}");
            let k = KeyWords::from_bits(&p, &[]);
            assert_eq!(c.walker().decide(&k), d, "{name} image walk: {p}");
        }
    }
}

/// `-m owner --uid-owner 1000-1999 -j DROP`, `-m owner ! --gid-owner 50
/// -j ACCEPT`, `-m owner --socket-exists -j DROP`, policy ACCEPT: every
/// engine and the image walk decide each owner as the decision list does
/// (key words 42 and 43), no socket and a socket without a file included.
#[test]
fn the_socket_owner_compiles_in_every_engine() {
    let rule = |id: u32, f: Field, set: IntervalSet, v: Verdict| {
        let mut m = Matches::any();
        m.constrain(f, set);
        Rule::new(id, m, Action::Verdict(v))
    };
    let rs = parapet_gen::one_chain(
        vec![
            rule(
                1,
                Field::SkUid,
                owner::xt_ids(1000, 1999, false),
                Verdict::Drop,
            ),
            rule(
                2,
                Field::SkGid,
                owner::xt_ids(50, 50, true),
                Verdict::Accept,
            ),
            rule(
                3,
                Field::SkUid,
                owner::xt_socket_exists(false),
                Verdict::Drop,
            ),
        ],
        Verdict::Accept,
    );
    let list = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
    let kv = |id: u32| owner::key_value(id) as u32;
    let none = owner::NO_SOCKET as u32;
    let nofile = owner::NO_FILE as u32;
    // (uid, gid) as packed -> the deciding rule (0: the policy)
    let cases = [
        (none, none, 2),
        (nofile, nofile, 2),
        (kv(1000), kv(50), 1),
        (kv(1999), kv(0), 1),
        (kv(2000), kv(0), 2),
        (kv(0), kv(50), 3),
        (kv(999), kv(50), 3),
    ];
    for (name, opts) in configs() {
        let c = Classifier::build(&list, &opts).unwrap();
        for &(uid, gid, want) in &cases {
            let mut p = Packet::v4(0x0a00_0001, 0x0a00_0002, 17, 1000, 53);
            (p.sk_uid, p.sk_gid) = (uid, gid);
            let d = list.classify(&p, &[]);
            let id = if d.rule_id <= 3 { d.rule_id } else { 0 };
            assert_eq!(id, want, "list: {p}");
            assert_eq!(c.classify(&p, &[]), d, "{name}: {p}");
            let k = KeyWords::from_bits(&p, &[]);
            assert_eq!(c.walker().decide(&k), d, "{name} image walk: {p}");
        }
    }
}

/// `-m rt --rt-type 0 -j DROP`, `-m rt ! --rt-type 0 --rt-segsleft 1:5
/// -j ACCEPT`, `-m rt --rt-type 4 --rt-len 24 -j DROP`, policy ACCEPT:
/// every engine
/// and the image walk decide each routing header (and none) as the
/// decision list does.
#[test]
fn the_routing_header_compiles_in_every_engine() {
    use routing::{Part, RoutingHeader};
    let byte = |v: u128| IntervalSet::point(v);
    let rule = |id: u32, parts: &[(Part, IntervalSet)], v: Verdict| {
        let mut m = Matches::any();
        m.constrain(Field::Routing, routing::present());
        for (part, set) in parts {
            m.constrain(Field::Routing, routing::values(*part, set));
        }
        Rule::new(id, m, Action::Verdict(v))
    };
    let rs = parapet_gen::one_chain(
        vec![
            rule(1, &[(Part::Type, byte(0))], Verdict::Drop),
            rule(
                2,
                &[
                    (Part::Type, byte(0).complement(255)),
                    (Part::SegmentsLeft, IntervalSet::range(1, 5)),
                ],
                Verdict::Accept,
            ),
            // a length byte on every type and segments-left value would
            // be 65,536 ranges (more than a constraint holds): refused
            // with TooManyRanges, checked below
            rule(
                3,
                &[(Part::Type, byte(4)), (Part::HdrLen, byte(2))],
                Verdict::Drop,
            ),
        ],
        Verdict::Accept,
    );
    let list = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
    // (type, segments left, hdrlen) or no header -> the deciding rule
    let cases = [
        (None, 0),
        (Some((0, 0, 0)), 1),
        (Some((2, 1, 2)), 2),
        (Some((2, 0, 2)), 0),
        (Some((4, 6, 2)), 3),
        (Some((4, 6, 3)), 0),
        (Some((255, 5, 0)), 2),
    ];
    for (name, opts) in configs() {
        let c = Classifier::build(&list, &opts).unwrap();
        for &(h, want) in &cases {
            let mut p: Packet = "253 2001:db8::1 > 2001:db8::2".parse().unwrap();
            p.rt = routing::key_value(h.map(|(t, s, l)| RoutingHeader {
                rt_type: t,
                segments_left: s,
                hdrlen: l,
            })) as u32;
            let d = list.classify(&p, &[]);
            let id = if d.rule_id <= 3 { d.rule_id } else { 0 };
            assert_eq!(id, want, "list: {p}");
            assert_eq!(c.classify(&p, &[]), d, "{name}: {p}");
            let k = KeyWords::from_bits(&p, &[]);
            assert_eq!(c.walker().decide(&k), d, "{name} image walk: {p}");
        }
    }
    // `--rt-len 24` alone: one range per type and segments-left pair
    let rs = parapet_gen::one_chain(
        vec![rule(1, &[(Part::HdrLen, byte(2))], Verdict::Drop)],
        Verdict::Accept,
    );
    let list = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
    let e = compile(&list, &CompileOptions::default()).unwrap_err();
    assert!(
        e.to_string().contains("rule 1 has a match of more than"),
        "{e}"
    );
}
