//! The BPF classifier-image walker against the spec: the worked example of
//! docs/image-format.md, random images (trees, partitions, every entry kind,
//! narrow/wide ranges, sets) checked packet by packet against a linear scan
//! of the decision list, non-terminal counting and logging, and images the
//! walker must refuse without harm.

mod common;

use std::net::{Ipv4Addr, Ipv6Addr};

use common::addr_mirror::{addr_mirror, addr_type_of};
use common::image::*;
use common::{load_dataplane, Rng};
use parapet_dataplane::frame::parse_frame;
use parapet_dataplane::frame::{Frame, L4};
use parapet_dataplane::{AttachPoint, Dataplane, KernelVerdict, LoadOptions, Stat};
use parapet_image::{KeyWords, FIXED_FIELDS, KEY_WORDS, MAX_CONSTRAINTS};
use parapet_model::{routing, IfName};

/// The fixed fields the BPF walker reads: ids 0..=28, the address types
/// (20, 21) typed by the mirror `addr_mirror()` and by prefix. The routing
/// header (24) from the frame; the socket owner (25, 26: words 42 and 43)
/// is 0 in every test frame's key (no socket at these hooks), and so are
/// the TCP option bitmaps (27, 28: words 44..=51, the wide fields at the
/// key's end; these images test no option, so the program walks none),
/// which the images cut and constrain too.
const WALKER_FIELDS: [u32; 29] = [
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25,
    26, 27, 28,
];

/// The random images' stand-in for the set constraint.
const SETS: u32 = FIXED_FIELDS;

fn walker_field(rng: &mut Rng) -> u32 {
    WALKER_FIELDS[rng.below(WALKER_FIELDS.len() as u64) as usize]
}

/// Source MACs of the random packets (the first is the frame builder's).
const MACS: [[u8; 6]; 3] = [
    [0x02, 0, 0, 0, 0, 0x01],
    [0x52, 0x54, 0x00, 0x12, 0x34, 0x56],
    [0x00, 0x1b, 0x21, 0xaa, 0xbb, 0xcc],
];

/// Destination MACs of the random packets: the frame builder's (another
/// host's), broadcast, an IPv4 multicast group's, and lo's own (zero).
const DST_MACS: [[u8; 6]; 4] = [
    [0x02, 0, 0, 0, 0, 0x02],
    [0xff; 6],
    [0x01, 0x00, 0x5e, 0x00, 0x00, 0x01],
    [0; 6],
];

/// The packet type (`PACKET_*`) the walker sees for a frame to `dst` at
/// `hook`. XDP reads the destination MAC alone: the group bit multicast,
/// all ones broadcast, else host. tc reads skb->pkt_type, which the test
/// run sets with eth_type_trans on lo (address and broadcast address
/// 00:00:00:00:00:00): lo's own address host, any other group address
/// multicast (all ones too: it is not lo's broadcast address), any other
/// address otherhost.
fn pkt_type_at(hook: AttachPoint, dst: &[u8]) -> u8 {
    use parapet_model::pkt_type::*;
    let group = dst[0] & 1 == 1;
    match hook {
        AttachPoint::Xdp if dst.iter().all(|&b| b == 0xff) => BROADCAST,
        AttachPoint::Xdp if group => MULTICAST,
        AttachPoint::Xdp => HOST,
        _ if dst.iter().all(|&b| b == 0) => HOST,
        _ if group => MULTICAST,
        _ => OTHERHOST,
    }
}

/// The image key the walker builds for `frame` at `hook` (XDP or tc
/// ingress): the parsed packet's, with the frame's source MAC and its
/// packet type (the walk state's key extension, not part of the parsed
/// key).
fn frame_key(frame: &[u8], hook: AttachPoint) -> [u32; KEY_WORDS] {
    let (_, key) = parse_frame(frame, frame.len() as u32, LO);
    let mut pkt = key
        .to_packet(IfName::new("lo").unwrap())
        .expect("an IP packet");
    let mut mac = [0u8; 8];
    mac[2..].copy_from_slice(&frame[6..12]);
    pkt.mac_src = Some(u64::from_be_bytes(mac));
    pkt.pkt_type = Some(pkt_type_at(hook, &frame[..6]));
    pkt.src_type = Some(addr_type_of(key.src_ip().unwrap()));
    pkt.dst_type = Some(addr_type_of(key.dst_ip().unwrap()));
    pkt.rt = routing_of(frame);
    KeyWords::new(&pkt, 0).to_words()
}

/// The first routing header of an untagged IPv6 frame built here (its
/// extension chain: options and routing headers, then the rest), packed
/// as `parapet_model::routing`; 0 without one.
fn routing_of(frame: &[u8]) -> u32 {
    if frame[12..14] != [0x86, 0xdd] {
        return 0;
    }
    let (mut nh, mut at) = (frame[20], 54);
    while matches!(nh, 0 | 43 | 60) {
        if nh == 43 {
            return routing::key_value(Some(routing::RoutingHeader {
                rt_type: frame[at + 2],
                segments_left: frame[at + 3],
                hdrlen: frame[at + 1],
            })) as u32;
        }
        nh = frame[at];
        at += (usize::from(frame[at + 1]) + 1) * 8;
    }
    0
}

const LO: u32 = 1;

fn dp(test: &str) -> Dataplane {
    let mut dp = load_dataplane(
        test,
        &LoadOptions {
            debug: true,
            slot_pages: 64,
            ..LoadOptions::default()
        },
    );
    dp.set_ifname(LO, "lo").unwrap();
    dp.set_addr_types(&addr_mirror()).unwrap();
    dp
}

fn verdict_of(code: u32) -> KernelVerdict {
    match code {
        0 => KernelVerdict::Accept,
        1 => KernelVerdict::Drop,
        _ => KernelVerdict::Reject,
    }
}

fn install(dp: &mut Dataplane, spec: &ImageSpec) {
    dp.write_image(&to_bytes(&assemble(spec))).unwrap();
    dp.swap().unwrap();
}

/// Run `frame` at `hook`; return (rule id, verdict, non-terminal ids).
fn classify(dp: &Dataplane, hook: AttachPoint, frame: &[u8]) -> (u32, KernelVerdict, Vec<u32>) {
    let out = dp.test_run(hook, frame, LO, 1).unwrap();
    let d = dp.last_decision().unwrap().unwrap();
    assert!(d.by_image, "the image must decide");
    assert_eq!(out.passed, d.verdict == KernelVerdict::Accept);
    (d.rule_id, d.verdict, d.nonterminal)
}

fn expect(spec: &ImageSpec, frame: &[u8], hook: AttachPoint) -> (u32, KernelVerdict, Vec<u32>) {
    let (rule, code, nonterm) = reference(spec, &frame_key(frame, hook));
    (rule, verdict_of(code), nonterm)
}

fn narrow(field: u32, ranges: &[(u128, u128)]) -> Constraint {
    Constraint::Ranges {
        field,
        wide: false,
        ranges: ranges.to_vec(),
    }
}

fn decide(rule_id: u32, verdict: u32, constraints: Vec<Constraint>) -> Entry {
    Entry {
        rule_id,
        kind: KIND_DECIDE,
        counted: false,
        verdict,
        resume: 0,
        constraints,
    }
}

#[test]
#[ignore = "needs root"]
fn worked_example_of_the_spec() {
    let mut dp = dp("worked_example_of_the_spec");
    // 1: tcp dport 22 ACCEPT; 2: saddr 10.0.0.0/8 DROP; policy DROP.
    let spec = ImageSpec {
        entries: vec![
            decide(1, 0, vec![narrow(3, &[(6, 6)]), narrow(5, &[(22, 22)])]),
            decide(2, 1, vec![narrow(1, &[(0x0a00_0000, 0x0aff_ffff)])]),
        ],
        verdicts: vec![0, 1],
        policy: 1,
        partitions: vec![Tree::Leaf(vec![0, 1])],
    };
    install(&mut dp, &spec);
    let a = Ipv4Addr::new(10, 1, 2, 3);
    let b = Ipv4Addr::new(192, 0, 2, 1);
    for hook in [AttachPoint::Xdp, AttachPoint::Tc] {
        let ssh = Frame::ipv4(a, b).tcp(5000, 22, 0x02).build();
        assert_eq!(
            classify(&dp, hook, &ssh),
            (1, KernelVerdict::Accept, vec![])
        );
        let dns = Frame::ipv4(a, b).udp(5000, 53).build();
        assert_eq!(classify(&dp, hook, &dns), (2, KernelVerdict::Drop, vec![]));
        let other = Frame::ipv4(b, a).udp(5000, 53).build();
        assert_eq!(
            classify(&dp, hook, &other),
            (0, KernelVerdict::Drop, vec![])
        );
    }
    assert_eq!(dp.counter(1).unwrap().packets, 2);
    assert_eq!(dp.counter(2).unwrap().packets, 2);
    assert_eq!(dp.counter(0).unwrap().packets, 2);
    assert_eq!(dp.stats().unwrap().get(Stat::Image), 6);
}

/// Packet descriptors drawn from small pools, so random rules hit often.
#[derive(Clone, Debug)]
struct Pkt {
    v6: bool,
    src: usize,
    dst: usize,
    proto: u8,
    sport: u16,
    dport: u16,
    flags: u8,
    icmp: (u8, u8),
    later_fragment: bool,
    ttl: u8,
    dscp: u8,
    payload: usize,
    mac: usize,
    dst_mac: usize,
    /// IPv6: a routing header's (type, segments left, Hdr Ext Len).
    rt: Option<(u8, u8, u8)>,
}

const V4: [Ipv4Addr; 9] = [
    Ipv4Addr::new(10, 0, 0, 1),
    Ipv4Addr::new(10, 0, 0, 200),
    Ipv4Addr::new(10, 1, 2, 3),
    Ipv4Addr::new(192, 0, 2, 9),
    Ipv4Addr::new(198, 51, 100, 1),
    Ipv4Addr::new(255, 255, 255, 255),
    Ipv4Addr::new(224, 0, 0, 251),
    Ipv4Addr::new(127, 0, 0, 1),
    Ipv4Addr::new(127, 255, 255, 255),
];
const V6: [Ipv6Addr; 6] = [
    Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1),
    Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0xff),
    Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 5),
    Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1),
    Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1),
    Ipv6Addr::LOCALHOST,
];
const PORTS: [u16; 8] = [0, 22, 53, 80, 443, 1024, 8080, 65535];

impl Pkt {
    fn random(rng: &mut Rng) -> Pkt {
        let v6 = rng.chance(30);
        let n = if v6 { V6.len() } else { V4.len() } as u64;
        let protos: &[u8] = if v6 {
            &[6, 17, 58, 47]
        } else {
            &[6, 17, 1, 47]
        };
        let icmps = [(8, 0), (0, 0), (3, 1), (128, 0)];
        Pkt {
            v6,
            src: rng.below(n) as usize,
            dst: rng.below(n) as usize,
            proto: protos[rng.below(protos.len() as u64) as usize],
            sport: PORTS[rng.below(8) as usize],
            dport: PORTS[rng.below(8) as usize],
            flags: [0x02, 0x10, 0x12, 0x11][rng.below(4) as usize],
            icmp: icmps[rng.below(4) as usize],
            later_fragment: rng.chance(10),
            ttl: [1, 63, 64, 128, 255][rng.below(5) as usize],
            dscp: [0, 10, 46, 63][rng.below(4) as usize],
            payload: [0, 8, 9, 100][rng.below(4) as usize],
            mac: rng.below(MACS.len() as u64) as usize,
            dst_mac: rng.below(DST_MACS.len() as u64) as usize,
            rt: (v6 && rng.chance(50)).then(|| {
                (
                    [0, 2, 4][rng.below(3) as usize],
                    [0, 1, 5][rng.below(3) as usize],
                    [0, 2][rng.below(2) as usize],
                )
            }),
        }
    }

    fn frame(&self) -> Vec<u8> {
        let f = if self.v6 {
            let mut f = Frame::ipv6(V6[self.src], V6[self.dst]);
            if let Some((rt_type, segments_left, len8)) = self.rt {
                f = f.ext(parapet_dataplane::frame::Ext::RoutingHeader {
                    len8,
                    rt_type,
                    segments_left,
                });
            }
            if self.later_fragment {
                f.ext(parapet_dataplane::frame::Ext::Fragment {
                    offset: 8,
                    more: false,
                })
            } else {
                f
            }
        } else {
            let f = Frame::ipv4(V4[self.src], V4[self.dst]);
            if self.later_fragment {
                f.ipv4_frag(8, false)
            } else {
                f
            }
        };
        let f = match self.proto {
            6 => f.tcp(self.sport, self.dport, self.flags),
            17 => f.udp(self.sport, self.dport),
            1 => f.l4(L4::Icmp {
                ty: self.icmp.0,
                code: self.icmp.1,
            }),
            58 => f.l4(L4::Icmpv6 {
                ty: self.icmp.0,
                code: self.icmp.1,
            }),
            p => f.l4(L4::Raw {
                proto: p,
                header: vec![0; 4],
            }),
        };
        let mut frame = f
            .ttl(self.ttl)
            .dscp(self.dscp)
            .payload(self.payload)
            .build();
        frame[..6].copy_from_slice(&DST_MACS[self.dst_mac]);
        frame[6..12].copy_from_slice(&MACS[self.mac]);
        frame
    }

    /// The packet's keys at XDP and at tc (they differ in the packet
    /// type only).
    fn keys(&self) -> [[u32; KEY_WORDS]; 2] {
        let f = self.frame();
        [AttachPoint::Xdp, AttachPoint::Tc].map(|h| frame_key(&f, h))
    }
}

/// Sorted, disjoint closed ranges around values seen in the pool.
fn random_ranges(
    rng: &mut Rng,
    pool: &[[u32; KEY_WORDS]],
    field: u32,
    wide: bool,
) -> Vec<(u128, u128)> {
    let cap: u128 = if wide {
        u128::MAX
    } else {
        u128::from(u32::MAX)
    };
    // Mostly a few ranges (the walker scans up to 4 directly), sometimes
    // many (it binary-searches those): add ranges at random values too.
    let many = rng.chance(25);
    let extra = if many { 5 + rng.below(20) } else { 0 };
    let mut raw: Vec<(u128, u128)> = (0..extra)
        .map(|_| {
            let v = u128::from(rng.next()) * u128::from(rng.next()) % cap;
            (v, v.saturating_add(u128::from(rng.below(1000))).min(cap))
        })
        .collect();
    raw.extend((0..1 + rng.below(4)).map(|_| {
        let v = key_value(&pool[rng.below(pool.len() as u64) as usize], field).min(cap);
        let below = if rng.chance(50) {
            0
        } else {
            u128::from(rng.below(300))
        };
        let above = if rng.chance(50) {
            0
        } else {
            u128::from(rng.below(300))
        };
        (v.saturating_sub(below), v.saturating_add(above).min(cap))
    }));
    raw.sort();
    let mut out: Vec<(u128, u128)> = Vec::new();
    for (lo, hi) in raw {
        match out.last_mut() {
            // merge overlapping and adjacent ranges: the format wants them
            // disjoint
            Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
            _ => out.push((lo, hi)),
        }
    }
    out
}

fn random_constraint(rng: &mut Rng, pool: &[[u32; KEY_WORDS]], field: u32) -> Constraint {
    if field == SETS {
        let mask = rng.next();
        let want = if rng.chance(70) {
            0
        } else {
            (mask & rng.next()) | (1 & mask)
        };
        return Constraint::Sets { mask, want };
    }
    let (_, is128) = field_layout(field);
    // 128-bit fields may still use narrow ranges (IPv4 values); IPv6
    // values then simply never match, which is part of what we test.
    let wide = is128 && rng.chance(60);
    let ranges = if rng.chance(3) {
        Vec::new() // r = 0: never matches
    } else if field == 8 {
        let lo = key_value(&pool[0], 8);
        if rng.chance(70) {
            vec![(lo, lo)]
        } else {
            vec![(lo + 1, lo + 1000)]
        }
    } else {
        random_ranges(rng, pool, field, wide)
    };
    Constraint::Ranges {
        field,
        wide: wide || field == 8 || field == 9,
        ranges,
    }
}

fn random_tree(
    rng: &mut Rng,
    pool: &[[u32; KEY_WORDS]],
    spec: &[Entry],
    list: Vec<u32>,
    depth: u32,
) -> Tree {
    if list.len() <= 1 || depth >= 6 || rng.chance(20) {
        return Tree::Leaf(list);
    }
    if depth < 3 && rng.chance(30) {
        return random_multi(rng, pool, spec, list, depth);
    }
    let field = walker_field(rng);
    let v = key_value(&pool[rng.below(pool.len() as u64) as usize], field);
    let cut = match rng.below(3) {
        0 => v.saturating_sub(1),
        1 => v,
        _ => v.saturating_add(1),
    };
    // The compiler's invariant: an entry that can match a packet is in the
    // leaf that packet reaches.
    let side = |left: bool| -> Vec<u32> {
        list.iter()
            .copied()
            .filter(|&i| {
                spec[i as usize]
                    .constraints
                    .iter()
                    .all(|c| c.could(field, cut, left))
            })
            .collect()
    };
    let (l, r) = (side(true), side(false));
    Tree::Node {
        field,
        cut,
        le: Box::new(random_tree(rng, pool, spec, l, depth + 1)),
        gt: Box::new(random_tree(rng, pool, spec, r, depth + 1)),
    }
}

/// A multi-way node on a one-word field, its region placed around pool
/// values; each child holds exactly the entries that can match a value
/// routed to it, so a wrong child index loses matches.
fn random_multi(
    rng: &mut Rng,
    pool: &[[u32; KEY_WORDS]],
    spec: &[Entry],
    list: Vec<u32>,
    depth: u32,
) -> Tree {
    // one-word fields whose values vary across the pool
    const ONE_WORD: [u32; 8] = [3, 4, 5, 6, 7, 12, 13, 14];
    let field = ONE_WORD[rng.below(8) as usize];
    let v = key_value(&pool[rng.below(pool.len() as u64) as usize], field) as u32;
    let bits = 1 + rng.below(3) as u32;
    let shift = rng.below(5) as u32;
    // mostly inside the region, sometimes just past its end (clamped)
    let lo = v.saturating_sub(rng.below(u64::from(5u32 << (bits + shift)) / 4) as u32);
    let last = (1u32 << bits) - 1;
    let children = (0..=last)
        .map(|j| {
            let a = u128::from(lo) + (u128::from(j) << shift);
            let keep = |e: &Entry| {
                e.constraints.iter().all(|c| {
                    if j < last {
                        c.could_in(field, a, a + (1u128 << shift) - 1)
                    } else {
                        // the last child also takes every value the
                        // clamp sends it: above the region and below lo
                        c.could_in(field, a, u128::from(u32::MAX))
                            || (lo > 0 && c.could_in(field, 0, u128::from(lo) - 1))
                    }
                })
            };
            let sub: Vec<u32> = list
                .iter()
                .copied()
                .filter(|&i| keep(&spec[i as usize]))
                .collect();
            random_tree(rng, pool, spec, sub, depth + 1)
        })
        .collect();
    Tree::Multi {
        field,
        lo,
        bits,
        shift,
        children,
    }
}

fn random_spec(rng: &mut Rng, pool: &[[u32; KEY_WORDS]]) -> ImageSpec {
    let n = 1 + rng.below(40) as usize;
    let mut entries = Vec::new();
    for i in 0..n {
        let kind = match rng.below(20) {
            0..=12 => KIND_DECIDE,
            13 | 14 => KIND_LOG,
            15 => KIND_COUNT,
            16 => KIND_JUMP,
            _ => KIND_RETURN,
        };
        // every field the walker reads, and the set constraint
        let all: Vec<u32> = WALKER_FIELDS.iter().copied().chain([SETS]).collect();
        let mut fields = all.clone();
        let mut constraints = Vec::new();
        if rng.chance(10) {
            // beyond the 16 the unrolled check takes, up to the walker's
            // cap (a field may repeat: its constraints all hold)
            for _ in 0..17 + rng.below(MAX_CONSTRAINTS as u64 - 16) {
                let f = all[rng.below(all.len() as u64) as usize];
                constraints.push(random_constraint(rng, pool, f));
            }
        } else {
            for _ in 0..rng.below(4) {
                let f = fields.remove(rng.below(fields.len() as u64) as usize);
                constraints.push(random_constraint(rng, pool, f));
            }
        }
        entries.push(Entry {
            rule_id: i as u32 + 1,
            kind,
            counted: kind == KIND_RETURN && rng.chance(50),
            verdict: if kind == KIND_DECIDE {
                rng.below(3) as u32
            } else {
                0
            },
            resume: if kind == KIND_RETURN {
                (i as u64 + 1 + rng.below((n - i) as u64)) as u32
            } else {
                0
            },
            constraints,
        });
    }
    let parts = 1 + rng.below(3) as usize;
    let mut lists = vec![Vec::new(); parts];
    for i in 0..n {
        lists[rng.below(parts as u64) as usize].push(i as u32);
    }
    let partitions = lists
        .into_iter()
        .map(|l| random_tree(rng, pool, &entries, l, 0))
        .collect();
    ImageSpec {
        entries,
        verdicts: vec![0, 1, 2],
        policy: rng.below(3) as u32,
        partitions,
    }
}

#[test]
#[ignore = "needs root"]
fn random_images_match_the_linear_reference() {
    let mut dp = dp("random_images_match_the_linear_reference");
    let mut rng = Rng::new(0x0bad_cafe_f00d_1234);
    let mut decided_by_rule = 0;
    let mut with_nonterm = 0;
    let mut truncated = 0u64;
    let mut checks = 0;
    let mut many_ranges = 0;
    for round in 0..60 {
        let pkts: Vec<Pkt> = (0..12).map(|_| Pkt::random(&mut rng)).collect();
        let pool: Vec<[u32; KEY_WORDS]> = pkts.iter().flat_map(Pkt::keys).collect();
        let spec = random_spec(&mut rng, &pool);
        many_ranges += spec
            .entries
            .iter()
            .flat_map(|e| &e.constraints)
            .filter(|c| matches!(c, Constraint::Ranges { ranges, .. } if ranges.len() > 4))
            .count();
        install(&mut dp, &spec);
        for (j, p) in pkts.iter().enumerate() {
            let frame = p.frame();
            let hook = if j % 2 == 0 {
                AttachPoint::Xdp
            } else {
                AttachPoint::Tc
            };
            let (rule, verdict, mut nonterm) = expect(&spec, &frame, hook);
            if nonterm.len() > 16 {
                nonterm.truncate(16);
                truncated += 1;
            }
            let got = classify(&dp, hook, &frame);
            assert_eq!(
                got,
                (rule, verdict, nonterm.clone()),
                "round {round} packet {j} {p:?}\nimage {:?}",
                spec.entries
            );
            decided_by_rule += usize::from(rule != 0);
            with_nonterm += usize::from(!nonterm.is_empty());
            checks += 1;
        }
    }
    assert_eq!(
        dp.stats().unwrap().get(Stat::NontermTruncated),
        truncated,
        "truncation is reported"
    );
    assert_eq!(dp.stats().unwrap().get(Stat::ImageError), 0);
    // The generator must exercise rules, policies and non-terminals.
    assert!(decided_by_rule > checks / 4, "{decided_by_rule}/{checks}");
    assert!(decided_by_rule < checks, "policy never decided");
    assert!(with_nonterm > 20, "{with_nonterm}/{checks}");
    assert!(
        many_ranges > 20,
        "binary-search path barely used: {many_ranges}"
    );
}

#[test]
#[ignore = "needs root"]
fn nonterminal_entries_are_counted_and_logged() {
    let mut dp = dp("nonterminal_entries_are_counted_and_logged");
    // 1: LOG udp; 2: counter dport 53; 3: udp dport 53 DROP; policy ACCEPT.
    let udp = narrow(3, &[(17, 17)]);
    let spec = ImageSpec {
        entries: vec![
            Entry {
                kind: KIND_LOG,
                ..decide(1, 0, vec![udp.clone()])
            },
            Entry {
                kind: KIND_COUNT,
                ..decide(2, 0, vec![narrow(5, &[(53, 53)])])
            },
            decide(3, 1, vec![udp, narrow(5, &[(53, 53)])]),
        ],
        verdicts: vec![0, 1],
        policy: 0,
        partitions: vec![Tree::Leaf(vec![0, 1, 2])],
    };
    install(&mut dp, &spec);
    dp.set_log_rate(1, 100, 10).unwrap();
    let a = Ipv4Addr::new(10, 0, 0, 1);
    let dns = Frame::ipv4(a, a).udp(1, 53).payload(10).build();
    let ntp = Frame::ipv4(a, a).udp(1, 123).build();
    assert_eq!(
        classify(&dp, AttachPoint::Xdp, &dns),
        (3, KernelVerdict::Drop, vec![1, 2])
    );
    assert_eq!(
        classify(&dp, AttachPoint::Tc, &ntp),
        (0, KernelVerdict::Accept, vec![1])
    );
    for (rule, packets, bytes) in [(1, 2, 38 + 28), (2, 1, 38), (3, 1, 38), (0, 1, 28)] {
        let c = dp.counter(rule).unwrap();
        assert_eq!((c.packets, c.bytes), (packets, bytes), "rule {rule}");
    }
    let ev = dp.poll_log(10);
    assert_eq!(ev.len(), 2);
    assert_eq!(
        (ev[0].rule_id, ev[0].verdict, ev[0].key.dport),
        (1, KernelVerdict::Drop, 53)
    );
    assert_eq!(
        (ev[1].rule_id, ev[1].verdict, ev[1].key.dport),
        (1, KernelVerdict::Accept, 123)
    );
}

#[test]
#[ignore = "needs root"]
fn broken_images_fall_back_without_harm() {
    let mut dp = dp("broken_images_fall_back_without_harm");
    dp.set_policy(KernelVerdict::Drop).unwrap(); // interim classifier: drop all
    let tree = Tree::Node {
        field: 5,
        cut: 100,
        le: Box::new(Tree::Leaf(vec![0])),
        gt: Box::new(Tree::Leaf(vec![0])),
    };
    let spec = ImageSpec {
        entries: vec![decide(1, 0, vec![])],
        verdicts: vec![0],
        policy: 0,
        partitions: vec![tree],
    };
    let good = assemble(&spec);
    let pkt = Frame::ipv4(V4[0], V4[1]).udp(1, 53).build();
    type Breaker = fn(&mut Vec<u32>);
    let breakers: Vec<(&str, Breaker)> = vec![
        ("node child points back to itself", |w| {
            let n = w[14] as usize;
            w[n + 1] = 0;
        }),
        ("leaf count beyond the slot", |w| {
            let l = w[16] as usize;
            w[l] = 0x7fff_ffff;
        }),
        ("entry index beyond n_entries", |w| {
            let l = w[16] as usize;
            w[l + 1] = 5;
        }),
        ("root node index out of range", |w| {
            let p = w[13] as usize;
            w[p] = 77;
        }),
        ("too many constraints", |w| {
            let e = w[19] as usize;
            w[e + 1] |= 200 << 16;
        }),
        ("record offset far outside the slot", |w| {
            let t = w[18] as usize;
            w[t] = 0x00ff_ffff;
        }),
        ("verdict index out of range", |w| {
            let e = w[19] as usize;
            w[e + 1] |= 9 << 8;
        }),
        ("zero partitions", |w| w[7] = 0),
        ("more partitions than the format allows", |w| w[7] = 9),
        ("partition table outside the slot", |w| w[13] = 0x00ff_ffff),
        ("verdict table outside the slot", |w| w[21] = 0x00ff_ffff),
        ("leaf count at the iterator cap", |w| {
            let l = w[16] as usize;
            w[l] = 1 << 23;
        }),
        ("unknown version", |w| w[1] = parapet_image::VERSION + 1),
    ];
    for (i, (what, br)) in breakers.iter().enumerate() {
        let mut w = good.clone();
        br(&mut w);
        reseal(&mut w);
        if what.contains("version") {
            // the header check refuses it before it reaches a slot
            assert!(dp.write_image(&to_bytes(&w)).is_err());
            dp.write_image_unchecked(&to_bytes(&w)).unwrap();
        } else {
            dp.write_image(&to_bytes(&w)).unwrap();
        }
        dp.swap().unwrap();
        for hook in [AttachPoint::Xdp, AttachPoint::Tc] {
            let out = dp.test_run(hook, &pkt, LO, 1).unwrap();
            let d = dp.last_decision().unwrap().unwrap();
            assert!(!d.by_image, "{what}: walker accepted a broken image");
            assert!(!out.passed, "{what}: fallback is the interim classifier");
        }
        assert_eq!(
            dp.stats().unwrap().get(Stat::ImageError),
            2 * (i as u64 + 1),
            "{what}"
        );
    }
    // And the intact image works.
    dp.write_image(&to_bytes(&good)).unwrap();
    dp.swap().unwrap();
    assert_eq!(
        classify(&dp, AttachPoint::Xdp, &pkt),
        (1, KernelVerdict::Accept, vec![])
    );
}
