//! The user-space fast path (compact trees built from the image, lock-step
//! batch walk) must answer exactly as the walk of the image words — the
//! BPF walker's view — and as the decision list, on every shape it serves:
//! ClassBench sets, random pure lists with IPv6, sets, negations and
//! multi-range constraints (complex records), 128-bit cuts, adversarial
//! lists, boundary packets.

mod common;

use common::*;
use parapet_compile::*;
use parapet_gen::*;
use parapet_model::*;

/// Checks single and batch lookups, fast path against image walk against
/// the list, for `keys` built from `packets` and their set bits.
fn check(c: &Classifier, list: &DecisionList, packets: &[(Packet, Vec<bool>)], what: &str) {
    let w = c.walker();
    assert!(
        c.fast_path().is_some(),
        "{what}: pure list without the fast path"
    );
    let keys: Vec<KeyWords> = packets
        .iter()
        .map(|(p, b)| KeyWords::from_bits(p, b))
        .collect();
    let mut fast = vec![0u32; keys.len()];
    let mut image = vec![0u32; keys.len()];
    c.classify_batch_ids(&keys, &mut fast);
    w.first_match_ids(&keys, &mut image);
    for (i, ((p, bits), k)) in packets.iter().zip(&keys).enumerate() {
        let want = list.classify(p, bits).rule_id;
        assert_eq!(
            c.first_match(k),
            w.first_match(k),
            "{what}: single lookup, packet {i} {p}"
        );
        assert_eq!(c.classify_id(k), want, "{what}: single id, packet {i} {p}");
        assert_eq!(fast[i], want, "{what}: batch, packet {i} {p}");
        assert_eq!(image[i], want, "{what}: image batch, packet {i} {p}");
    }
}

/// Packets at and ±1 around each end of every rule's ranges on the five
/// ClassBench fields (one field moved at a time), plus `extra`.
fn corners(list: &DecisionList, extra: &[Packet]) -> Vec<(Packet, Vec<bool>)> {
    let fields = [
        Field::SrcAddr,
        Field::DstAddr,
        Field::SrcPort,
        Field::DstPort,
        Field::Proto,
    ];
    let mut out: Vec<(Packet, Vec<bool>)> = extra.iter().map(|p| (p.clone(), vec![])).collect();
    for e in &list.entries {
        let r: Vec<(u128, u128)> = fields
            .iter()
            .map(|&f| {
                e.matches
                    .get(f)
                    .map(|s| s.ranges()[0])
                    .unwrap_or((0, f.max_value()))
            })
            .collect();
        let lo: Vec<u128> = r.iter().map(|x| x.0).collect();
        let pkt = |v: &[u128]| {
            Packet::v4(
                v[0] as u32,
                v[1] as u32,
                v[4] as u8,
                v[2] as u16,
                v[3] as u16,
            )
        };
        out.push((pkt(&lo), vec![]));
        for f in 0..5 {
            for at in [r[f].0.wrapping_sub(1), r[f].1, r[f].1.wrapping_add(1)] {
                let mut v = lo.clone();
                v[f] = at;
                out.push((pkt(&v), vec![]));
            }
        }
    }
    out
}

#[test]
fn random_pure_lists_fast_equals_image_and_list() {
    let (mut complex, mut wide, mut built) = (0usize, 0usize, 0usize);
    for seed in 0..240u64 {
        let spec = RandomSpec {
            rules: 5 + (seed as usize * 13 % 300),
            user_chains: 0,
            set_refs: (seed % 4) as usize,
            ipv6: seed % 3 != 0,
            control_flow: false,
        };
        let rs = random_ruleset(seed, &spec);
        let list = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
        assert!(list.is_pure_first_match(), "seed {seed}");
        let packets: Vec<(Packet, Vec<bool>)> = packets_for(&rs, seed, 200)
            .into_iter()
            .enumerate()
            .map(|(i, p)| {
                let bits = (0..rs.set_refs.len())
                    .map(|n| !(seed as usize + i * 7 + n * 3).is_multiple_of(3))
                    .collect();
                (p, bits)
            })
            .collect();
        for (name, opts) in configs() {
            let c = Classifier::build(&list, &opts).unwrap();
            let (_, cx, wd) = c.fast_path().expect("pure list").shape();
            complex += cx;
            wide += wd;
            built += 1;
            check(&c, &list, &packets, &format!("{name}, seed {seed}"));
        }
    }
    // The corpus reaches the fast path's fallbacks, or it proves nothing
    // about them.
    assert!(built > 1000, "{built}");
    assert!(complex > 100, "only {complex} complex records");
    assert!(wide > 20, "only {wide} 128-bit cuts");
}

/// The header fields (TTL, DSCP, length: value slots 16..19) through the
/// fast path's cuts and fixed records: a slot written wrong, or read from
/// the wrong place, answers differently from the image walk and the list.
#[test]
fn header_field_lists_fast_equals_image_and_list() {
    let mut constrained = 0usize;
    for seed in 0..60u64 {
        let spec = RandomSpec {
            rules: 5 + (seed as usize * 29 % 200),
            user_chains: 0,
            set_refs: 0,
            ipv6: seed % 3 != 0,
            control_flow: false,
        };
        let rs = random_ruleset_with_header_fields(seed, &spec);
        let list = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
        assert!(list.is_pure_first_match(), "seed {seed}");
        constrained += list
            .entries
            .iter()
            .filter(|e| {
                [Field::Ttl, Field::Dscp, Field::Length]
                    .iter()
                    .any(|&f| e.matches.get(f).is_some())
            })
            .count();
        let packets: Vec<(Packet, Vec<bool>)> = packets_for(&rs, seed, 200)
            .into_iter()
            .map(|p| (p, vec![]))
            .collect();
        for (name, opts) in configs() {
            let c = Classifier::build(&list, &opts).unwrap();
            check(
                &c,
                &list,
                &packets,
                &format!("header fields, {name}, seed {seed}"),
            );
        }
    }
    assert!(
        constrained > 100,
        "only {constrained} entries with header fields"
    );
}

#[test]
fn classbench_fast_equals_image_and_list() {
    let dir = classbench_dir();
    let mut sets = 0;
    for name in [
        "acl1_1k", "acl2_1k", "acl3_1k", "acl4_1k", "acl5_1k", "fw1_1k", "fw2_1k", "fw3_1k",
        "fw4_1k", "fw5_1k", "ipc1_1k", "ipc2_1k",
    ] {
        let Some(text) = read_maybe_gz(&dir.join(name)) else {
            continue;
        };
        let list = classbench_list(&text);
        let c = Classifier::build(&list, &BuildOptions::default()).unwrap();
        check(&c, &list, &corners(&list, &[]), name);
        sets += 1;
    }
    for name in ["acl1_10k", "fw1_10k", "ipc1_10k"] {
        let (Some(text), Some(trace)) = (
            read_maybe_gz(&dir.join(format!("{name}.gz"))),
            read_maybe_gz(&dir.join(format!("{name}_trace.gz"))),
        ) else {
            continue;
        };
        let list = classbench_list(&text);
        let trace: Vec<Packet> = classbench_trace(&trace).into_iter().step_by(23).collect();
        let c = Classifier::build(&list, &BuildOptions::default()).unwrap();
        let mut packets = corners(&list, &trace);
        packets.truncate(12_000);
        check(&c, &list, &packets, name);
        sets += 1;
    }
    if sets == 0 {
        eprintln!("skipped: no ClassBench data under {}", dir.display());
    }
}

#[test]
fn adversarial_lists_fast_equals_image_and_list() {
    for n in [1usize, 3, 25, 400, 3000] {
        let rs = worst_case(n);
        let list = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
        let mut pk = packets_for(&rs, n as u64, 300);
        pk.push(worst_case_packet());
        let packets: Vec<_> = pk.into_iter().map(|p| (p, vec![])).collect();
        for (name, opts) in configs() {
            let c = Classifier::build(&list, &opts).unwrap();
            check(&c, &list, &packets, &format!("worst_case({n}) {name}"));
        }
    }
    for (n, seed) in [(300usize, 3u64), (2000, 4)] {
        let rs = cross_product(n, seed);
        let list = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
        let packets: Vec<_> = packets_for(&rs, seed, 1500)
            .into_iter()
            .map(|p| (p, vec![]))
            .collect();
        for (name, opts) in configs() {
            let c = Classifier::build(&list, &opts).unwrap();
            check(&c, &list, &packets, &format!("cross_product({n}) {name}"));
        }
    }
}

#[test]
fn lists_with_non_terminal_rules_use_the_image_walk() {
    let rs = random_ruleset(
        7,
        &RandomSpec {
            rules: 60,
            user_chains: 3,
            control_flow: true,
            ..Default::default()
        },
    );
    let list = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
    assert!(!list.is_pure_first_match());
    let c = Classifier::build(&list, &BuildOptions::default()).unwrap();
    assert!(c.fast_path().is_none());
    assert_eq!(c.fast_bytes(), 0);
}
