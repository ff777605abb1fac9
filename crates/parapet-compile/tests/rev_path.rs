//! The reverse-path outcome (`fib saddr [. iif] oif missing|exists`,
//! `Field::RevPath`, key word 56) in the compiled engines against the
//! linear engine: random chains mixing the check's four spellings (and a
//! single outcome) with the source prefix, protocol and port, over packets
//! of every outcome, in every engine configuration and the image walk of
//! the key words the dataplane fills.

mod common;

use common::configs;
use parapet_compile::Classifier;
use parapet_image::{KeyWords, FLAG_REV_PATH};
use parapet_model::*;

/// xorshift64*: the test's own reproducible randomness.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The sets a rule's check can hold: `. iif oif missing`, `oif
/// missing`, their `exists`, and one outcome alone (`rpath other`).
fn check(rng: &mut Rng) -> IntervalSet {
    let all = rev_path::MAX as u128;
    match rng.below(5) {
        0 => rev_path::missing(true),
        1 => rev_path::missing(false),
        2 => rev_path::missing(true).complement(all),
        3 => rev_path::missing(false).complement(all),
        _ => IntervalSet::point(rng.below(3) as u128),
    }
}

fn ruleset(seed: u64, n: usize) -> Ruleset {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let rules = (0..n)
        .map(|i| {
            let mut m = Matches::any();
            if rng.below(10) < 7 {
                m.constrain(Field::RevPath, check(&mut rng));
            }
            if rng.below(10) < 4 {
                m.constrain(
                    Field::Proto,
                    IntervalSet::point([6, 17][rng.below(2) as usize]),
                );
            }
            if rng.below(10) < 3 {
                let lo = rng.below(4) as u128 * 16;
                m.constrain(Field::DstPort, IntervalSet::range(lo, lo + 20));
            }
            if rng.below(10) < 3 {
                let net = 0x0a00_0000 | (rng.below(4) as u128) << 8;
                m.constrain(Field::SrcAddr, IntervalSet::prefix(net, 24, 32));
            }
            let v = if rng.below(2) == 0 {
                Verdict::Accept
            } else {
                Verdict::Drop
            };
            Rule::new(i as u32 + 1, m, Action::Verdict(v))
        })
        .collect();
    let policy = if seed.is_multiple_of(2) {
        Verdict::Accept
    } else {
        Verdict::Drop
    };
    parapet_gen::one_chain(rules, policy)
}

fn packets(seed: u64, n: usize) -> Vec<Packet> {
    let mut rng = Rng(seed ^ 0x5eed_0000_7270_6174);
    (0..n)
        .map(|_| {
            let src = 0x0a00_0000 | (rng.below(5) as u32) << 8 | rng.below(256) as u32;
            let proto = [6, 17, 1][rng.below(3) as usize];
            let mut p = Packet::v4(src, 0x0a09_0001, proto, 1024, rng.below(90) as u16);
            p.rev_path = rng.below(3) as u8;
            p
        })
        .collect()
}

#[test]
fn random_reverse_path_rules_agree_with_the_linear_engine() {
    let mut decided = [0usize; 3];
    for seed in 0..32u64 {
        let rs = ruleset(seed, 2 + seed as usize % 14);
        let list = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
        let packets = packets(seed, 240);
        for (name, opts) in configs() {
            let c = Classifier::build(&list, &opts).unwrap();
            for p in &packets {
                let d = list.classify(p, &[]);
                if d.rule_id != 0 {
                    decided[p.rev_path as usize] += 1;
                }
                assert_eq!(c.classify(p, &[]), d, "seed {seed} {name}: {p}");
                let k = KeyWords::from_bits(p, &[]);
                assert_eq!(c.walker().decide(&k), d, "seed {seed} {name} walk: {p}");
            }
        }
    }
    // rules decide packets of every outcome, not only the policies
    assert!(decided.iter().all(|&n| n > 500), "{decided:?}");
}

/// `fib saddr . iif oif missing drop` then an accept: the outcome alone
/// decides, in every engine, and the image says it reads the outcome.
#[test]
fn the_common_spelling_drops_other_and_none() {
    let mut m = Matches::any();
    m.constrain(Field::RevPath, rev_path::missing(true));
    let rs = parapet_gen::one_chain(
        vec![
            Rule::new(1, m, Action::Verdict(Verdict::Drop)),
            Rule::new(2, Matches::any(), Action::Verdict(Verdict::Accept)),
        ],
        Verdict::Drop,
    );
    let list = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
    for (name, opts) in configs() {
        let c = Classifier::build(&list, &opts).unwrap();
        let flags = c.image().words()[parapet_image::hw::FLAGS];
        assert_ne!(flags & FLAG_REV_PATH, 0, "{name}");
        for (outcome, want) in [
            (rev_path::IIF, 2),
            (rev_path::OTHER, 1),
            (rev_path::NONE, 1),
        ] {
            let mut p = Packet::v4(0x0a00_0001, 0x0a00_0002, 17, 1000, 53);
            p.rev_path = outcome;
            assert_eq!(c.classify(&p, &[]).rule_id, want, "{name}: {p}");
        }
    }
    let mut plain = Matches::any();
    plain.constrain(Field::Proto, IntervalSet::point(6));
    let rs = parapet_gen::one_chain(
        vec![Rule::new(1, plain, Action::Verdict(Verdict::Drop))],
        Verdict::Accept,
    );
    let list = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
    let c = Classifier::build(&list, &Default::default()).unwrap();
    assert_eq!(
        c.image().words()[parapet_image::hw::FLAGS] & FLAG_REV_PATH,
        0
    );
}
