//! Masked comparisons (`field & mask == value`, the image's masked
//! constraint kind): every engine configuration, the fast path and the
//! image walk answer as the linear reference engine, packet by packet, on
//! random rulesets where some rules carry masked comparisons (narrow and
//! wide, negated or not). The trees treat a masked field as a wildcard;
//! the leaf check decides.

mod common;

use common::*;
use parapet_compile::*;
use parapet_gen::*;
use parapet_model::*;

/// A tiny deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Adds a masked comparison of one or two bits to about 40 % of the rules.
fn add_masked(rs: &mut Ruleset, rng: &mut Rng) -> Vec<u32> {
    let mut ids = Vec::new();
    for t in &mut rs.tables {
        for c in &mut t.chains {
            for r in &mut c.rules {
                if rng.below(100) >= 40 {
                    continue;
                }
                let (field, width) = match rng.below(5) {
                    0 => (Field::SrcAddr, 32),
                    1 => (Field::DstAddr, 128),
                    2 => (Field::DstPort, 16),
                    3 => (Field::SrcPort, 16),
                    _ => (Field::Proto, 8),
                };
                let mut mask = 1u128 << rng.below(width);
                if rng.below(2) == 0 {
                    mask |= 1u128 << rng.below(width);
                }
                let value = mask & (rng.next() as u128 | (rng.next() as u128) << 64);
                r.matches.constrain_masked(MaskedMatch {
                    field,
                    mask,
                    value,
                    negate: rng.below(10) < 3,
                });
                ids.push(r.id);
            }
        }
    }
    ids
}

#[test]
fn masked_rules_agree_with_linear_in_every_engine() {
    let mut rng = Rng(0x6d61_736b);
    let (mut checked, mut decided_by_masked, mut fast) = (0usize, 0usize, 0usize);
    for seed in 0..120u64 {
        let spec = RandomSpec {
            rules: 5 + (seed as usize * 7 % 100),
            user_chains: (seed % 4) as usize,
            set_refs: (seed % 3) as usize,
            ipv6: seed % 3 != 0,
            control_flow: seed % 4 == 1,
        };
        let mut rs = random_ruleset(seed, &spec);
        let masked = add_masked(&mut rs, &mut rng);
        let start = rs.select_chain(None).unwrap();
        let list = flatten(&rs, start).unwrap();
        let packets = packets_for(&rs, seed, 120);
        for (name, opts) in configs() {
            let c = Classifier::build(&list, &opts).unwrap();
            fast += c.fast_path().is_some() as usize;
            let c2 = Classifier::from_bytes(&c.image().to_bytes()).unwrap();
            for (i, pkt) in packets.iter().enumerate() {
                let bits = set_bits(seed, i, rs.set_refs.len());
                let want = list.classify(pkt, &bits);
                let got = c.classify(pkt, &bits);
                assert_eq!(got, want, "{name}, seed {seed}, packet {i}: {pkt}");
                assert_eq!(c2.classify(pkt, &bits), want, "{name} from bytes");
                let k = KeyWords::from_bits(pkt, &bits);
                assert_eq!(c.walker().decide(&k), want, "{name} image walk");
                checked += 1;
                decided_by_masked += masked.contains(&want.rule_id) as usize;
            }
        }
    }
    assert!(fast > 0, "no configuration used the fast path");
    assert!(
        decided_by_masked > checked / 20,
        "{decided_by_masked}/{checked} decided by a masked rule"
    );
}

/// A masked rule matches part of its box: the packets of the box it does
/// not match go on to the next rule, in every engine.
#[test]
fn a_masked_rule_lets_the_rest_of_its_box_through() {
    let mut m = Matches::any();
    m.constrain(Field::Family, IntervalSet::point(4));
    m.constrain_masked(MaskedMatch {
        field: Field::SrcAddr,
        mask: 0x0100_0001,
        value: 0x0000_0001,
        negate: false,
    });
    let mut wide = Matches::any();
    wide.constrain(Field::Family, IntervalSet::point(6));
    wide.constrain_masked(MaskedMatch {
        field: Field::SrcAddr,
        mask: 0xffff_0000_0000_0000_0000_0000_0000_0000,
        value: 0x2001_0000_0000_0000_0000_0000_0000_0000,
        negate: true,
    });
    let list = DecisionList {
        entries: vec![
            entry(1, m, Verdict::Drop),
            entry(2, wide, Verdict::Reject { with: None }),
            entry(3, Matches::any(), Verdict::Accept),
        ],
        policy: Verdict::Drop,
        set_ref_count: 0,
    };
    let v4 = |a: u32| Packet::v4(a, 1, 6, 1000, 80);
    let v6 = |a: u128| Packet::new(Family::V6, a, 1, 6, 1000, 80);
    let cases = [
        (v4(0x0a00_0001), 1),
        (v4(0x0b00_0001), 3),
        (v4(0x0a00_0002), 3),
        (v6(0x2001_0db8 << 96), 3),
        (v6(0x2002 << 112), 2),
    ];
    for (name, opts) in configs() {
        let c = Classifier::build(&list, &opts).unwrap();
        for (p, want) in &cases {
            assert_eq!(list.classify(p, &[]).rule_id, *want, "list: {p}");
            assert_eq!(c.classify(p, &[]).rule_id, *want, "{name}: {p}");
        }
    }
}

fn entry(rule_id: u32, matches: Matches, v: Verdict) -> Entry {
    Entry {
        rule_id,
        matches,
        kind: EntryKind::Decide(v),
        limit: None,
        recent: None,
        hashlimit: None,
        time: None,
        dynset: None,
        quota: None,
        statistic: None,
        set_mark: None,
    }
}
