//! How the compiler partitions a list: rules pinning both addresses share
//! the larger single-address tree, and a small catch-all partition of wide
//! rules gets longer leaves — with answers still equal to the list's.

use parapet_compile::*;
use parapet_gen::*;
use parapet_model::*;

/// `both` rules pinning a source and a destination /24, `src` pinning only
/// a source /24, `dst` only a destination /24, `wide` only a port range,
/// source and destination port ranges of up to `width` ports, shuffled together (seeded).
fn mixed(both: usize, src: usize, dst: usize, wide: usize, width: u64, seed: u64) -> Ruleset {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut kinds: Vec<u8> = [(0u8, both), (1, src), (2, dst), (3, wide)]
        .iter()
        .flat_map(|&(k, n)| std::iter::repeat_n(k, n))
        .collect();
    for i in (1..kinds.len()).rev() {
        kinds.swap(i, next() as usize % (i + 1));
    }
    let rules = kinds
        .iter()
        .enumerate()
        .map(|(i, &k)| {
            let mut m = Matches::any();
            m.constrain(Field::Family, IntervalSet::point(4));
            // Few distinct /24s so rules overlap and packets hit several.
            let net = |r: u64| (0x0a00_0000u32 | ((r % 256) as u32) << 8) as u128;
            if k == 0 || k == 1 {
                m.constrain(Field::SrcAddr, IntervalSet::prefix(net(next()), 24, 32));
            }
            if k == 0 || k == 2 {
                m.constrain(Field::DstAddr, IntervalSet::prefix(net(next()), 24, 32));
            }
            if k == 3 {
                for f in [Field::SrcPort, Field::DstPort] {
                    let lo = (next() % 60_000) as u128;
                    m.constrain(f, IntervalSet::range(lo, lo + (next() % width) as u128));
                }
            }
            let v = if i % 3 == 0 {
                Verdict::Accept
            } else {
                Verdict::Drop
            };
            Rule::new(0, m, Action::Verdict(v))
        })
        .collect();
    one_chain(rules, Verdict::Drop)
}

/// Single and batch lookups equal the list on generated packets.
fn check_answers(c: &Classifier, rs: &Ruleset, list: &DecisionList, what: &str) {
    let packets = packets_for(rs, 7, 4000);
    let keys: Vec<KeyWords> = packets.iter().map(|p| KeyWords::new(p, 0)).collect();
    let mut batch = vec![0u32; keys.len()];
    c.classify_batch_ids(&keys, &mut batch);
    for (i, (p, k)) in packets.iter().zip(&keys).enumerate() {
        let want = list.classify(p, &[]).rule_id;
        assert_eq!(c.classify_id(k), want, "{what}: single, packet {i} {p}");
        assert_eq!(batch[i], want, "{what}: batch, packet {i} {p}");
    }
}

fn partition<'a>(c: &'a Classifier, prefix: &str) -> &'a PartitionStats {
    c.stats()
        .partitions
        .iter()
        .find(|p| p.name.starts_with(prefix))
        .unwrap_or_else(|| panic!("no partition '{prefix}…' in\n{}", c.explain()))
}

#[test]
fn src_dst_rules_join_the_larger_single_address_tree() {
    // (both, src, dst): the host is the larger of src and dst.
    for (both, src, dst, host, other) in [
        (300, 100, 200, "dst specific", "src specific"),
        (300, 200, 100, "src specific", "dst specific"),
    ] {
        let rs = mixed(both, src, dst, 40, 5_000, both as u64 + src as u64);
        let list = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
        // Counted after `flatten`, which drops repeated rules.
        let count = |s: bool, d: bool| {
            list.entries
                .iter()
                .filter(|e| {
                    e.matches.get(Field::SrcAddr).is_some() == s
                        && e.matches.get(Field::DstAddr).is_some() == d
                })
                .count()
        };
        let (both, src, dst) = (count(true, true), count(true, false), count(false, true));
        let c = Classifier::build(&list, &BuildOptions::default()).unwrap();
        let what = format!("({both}, {src}, {dst})");
        assert_eq!(c.stats().partitions.len(), 3, "{what}:\n{}", c.explain());
        let h = partition(&c, host);
        assert!(h.name.ends_with("(with src+dst)"), "{what}: {}", h.name);
        let o = partition(&c, other);
        assert!(!o.name.contains("src+dst"), "{what}: {}", o.name);
        let host_n = both + if host.starts_with("src") { src } else { dst };
        let other_n = src + dst + both - host_n;
        assert_eq!(h.entries, host_n, "{what}:\n{}", c.explain());
        assert_eq!(o.entries, other_n, "{what}:\n{}", c.explain());
        // Cutting the host address copies none of the rules that pin it.
        assert!(h.replication < 1.5, "{what}:\n{}", c.explain());
        check_answers(&c, &rs, &list, &what);
    }
}

#[test]
fn small_catch_all_partitions_get_longer_leaves() {
    // 60 wide rules among ~610: ≤ 1/8, leaves up to 16.
    let rs = mixed(300, 100, 240, 60, 20_000, 11);
    let list = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
    let c = Classifier::build(&list, &BuildOptions::default()).unwrap();
    let n = partition(&c, "neither");
    assert!(n.max_leaf <= 16, "catch-all leaves:\n{}", c.explain());
    for p in &c.stats().partitions {
        if !p.name.starts_with("neither") {
            assert!(p.max_leaf <= 2, "{}:\n{}", p.name, c.explain());
        }
    }
    check_answers(&c, &rs, &list, "mixed list");

    // The same wide rules alone are the whole list: the catch-all keeps
    // the policy's leaves of 2 and needs a much larger tree, which is
    // what the longer leaves save in the mixed list.
    let mut wide = list.clone();
    wide.entries.retain(|e| {
        e.matches.get(Field::SrcAddr).is_none() && e.matches.get(Field::DstAddr).is_none()
    });
    assert_eq!(wide.entries.len(), n.entries);
    let alone = Classifier::build(&wide, &BuildOptions::default()).unwrap();
    let a = partition(&alone, "neither");
    assert!(
        2 * n.nodes <= a.nodes && n.depth < a.depth,
        "mixed:\n{}\nalone:\n{}",
        c.explain(),
        alone.explain()
    );
}

#[test]
fn budget_stopped_builds_keep_src_dst_rules_apart() {
    // The same list as above under a budget no tree fits: the merged
    // build stops cutting, so the compiler keeps the four groups.
    let rs = mixed(300, 100, 200, 40, 5_000, 3);
    let list = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
    let opts = BuildOptions {
        max_memory: 1,
        ..Default::default()
    };
    let c = Classifier::build(&list, &opts).unwrap();
    assert!(c.stats().memory_limited, "{}", c.explain());
    let names: Vec<&str> = c
        .stats()
        .partitions
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    assert!(
        names.contains(&"src+dst specific") && !names.iter().any(|n| n.contains("with")),
        "{}",
        c.explain()
    );
    check_answers(&c, &rs, &list, "budget-stopped");
    // Within budget, the same list is merged.
    let c = Classifier::build(&list, &BuildOptions::default()).unwrap();
    assert!(!c.stats().memory_limited && !c.stats().work_limited);
    assert!(
        c.stats()
            .partitions
            .iter()
            .any(|p| p.name.ends_with("(with src+dst)")),
        "{}",
        c.explain()
    );
}
