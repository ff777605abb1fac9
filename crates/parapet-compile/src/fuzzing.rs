//! Byte-driven differential checks, shared by the cargo-fuzz targets in
//! `fuzz/` and by stable tests that feed them pseudo-random bytes.
//!
//! [`check_classify`] decodes bytes into a small ruleset (chains, jumps,
//! gotos, RETURNs, LOGs, sets, overlapping ranges on small domains) and
//! packets, and panics if any engine configuration disagrees with the
//! decision list. [`check_image`] feeds bytes to the image loader and walks
//! whatever it accepts: it must never panic.

use crate::{BuildOptions, Classifier, Engine, Image, KeyWords};
use parapet_image::{self as image, hw};
use parapet_model::*;

/// Reads bytes as a stream of small numbers; zeros when exhausted.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }
    fn below(&mut self, n: u32) -> u32 {
        (self.byte() as u32) % n.max(1)
    }
}

fn small_range(b: &mut Bytes, base: u128) -> IntervalSet {
    let lo = b.below(16) as u128;
    let hi = lo + b.below(8) as u128;
    let set = IntervalSet::range(base + lo, base + hi);
    if b.below(8) == 0 {
        set.union(&IntervalSet::point(base + b.below(24) as u128))
    } else {
        set
    }
}

fn matches(b: &mut Bytes, sets: usize) -> Matches {
    let mut m = Matches::any();
    let mask = b.byte();
    if mask & 1 != 0 {
        m.constrain(
            Field::Family,
            IntervalSet::point(if b.below(4) == 0 { 6 } else { 4 }),
        );
    }
    if mask & 2 != 0 {
        m.constrain(Field::SrcAddr, small_range(b, 0x0a00_0000));
    }
    if mask & 4 != 0 {
        m.constrain(Field::DstAddr, small_range(b, 0));
    }
    if mask & 8 != 0 {
        m.constrain(
            Field::Proto,
            IntervalSet::point([6u128, 17, 1][b.below(3) as usize]),
        );
    }
    if mask & 16 != 0 {
        m.constrain(Field::DstPort, small_range(b, 20));
    }
    if mask & 32 != 0 {
        m.constrain(Field::SrcPort, small_range(b, 1000));
    }
    if mask & 64 != 0 && sets > 0 {
        m.constrain(
            Field::Set(b.below(sets as u32) as u16),
            IntervalSet::point(b.below(2) as u128),
        );
    }
    if mask & 128 != 0 {
        m.constrain(
            Field::CtState,
            IntervalSet::range(1, 1 + b.below(3) as u128),
        );
    }
    m
}

fn action(b: &mut Bytes, can_jump: bool) -> Action {
    match b.below(if can_jump { 9 } else { 7 }) {
        0 | 1 => Action::Verdict(Verdict::Accept),
        2 => Action::Verdict(Verdict::Drop),
        3 => Action::Verdict(Verdict::Reject {
            with: Some("tcp-reset".into()),
        }),
        4 => Action::Log(LogSpec::default()),
        5 => Action::Count,
        6 => Action::Return,
        7 => Action::Jump("A".into()),
        _ => Action::Goto("A".into()),
    }
}

/// Decodes a ruleset, its decision list and packets with set bits.
pub fn decode(data: &[u8]) -> (DecisionList, Vec<(Packet, Vec<bool>)>) {
    let mut b = Bytes(data);
    let sets = b.below(3) as usize;
    let n = 1 + b.below(40) as usize;
    let na = b.below(6) as usize;
    let base: Vec<Rule> = (0..n)
        .map(|_| {
            let m = matches(&mut b, sets);
            Rule::new(0, m, action(&mut b, na > 0))
        })
        .collect();
    let sub: Vec<Rule> = (0..na)
        .map(|_| {
            let m = matches(&mut b, sets);
            Rule::new(0, m, action(&mut b, false))
        })
        .collect();
    let mut rs = Ruleset {
        tables: vec![Table {
            name: "filter".into(),
            family: TableFamily::Inet,
            chains: vec![
                Chain {
                    name: "INPUT".into(),
                    base: Some(BaseChain {
                        hook: Hook::Input,
                        priority: 0,
                        policy: if b.below(2) == 0 {
                            Verdict::Accept
                        } else {
                            Verdict::Drop
                        },
                        counters: Counters::default(),
                    }),
                    rules: base,
                },
                Chain {
                    name: "A".into(),
                    base: None,
                    rules: sub,
                },
            ],
        }],
        set_refs: (0..sets)
            .map(|i| SetRef {
                name: format!("s{i}"),
                key: SetKeySpec::Flags(vec![Dir::Src]),
            })
            .collect(),
        left_to_kernel: Vec::new(),
    };
    rs.renumber();
    let list = flatten(&rs, rs.select_chain(None).expect("INPUT")).expect("flattens");
    let packets = (0..64)
        .map(|_| {
            let family = if b.below(5) == 0 {
                Family::V6
            } else {
                Family::V4
            };
            let mut p = Packet::new(
                family,
                0x0a00_0000 + b.below(26) as u128,
                b.below(26) as u128,
                [6u8, 17, 1][b.below(3) as usize],
                1000 + b.below(26) as u16,
                20 + b.below(26) as u16,
            );
            p.ct_state = CtState::ALL[b.below(5) as usize];
            let bits = (0..sets).map(|_| b.below(2) == 1).collect();
            (p, bits)
        })
        .collect();
    (list, packets)
}

/// Panics when some engine configuration disagrees with the decision list.
pub fn check_classify(data: &[u8]) {
    let (list, packets) = decode(data);
    let configs = [
        BuildOptions::default(),
        BuildOptions {
            engine: Engine::Linear,
            ..Default::default()
        },
        BuildOptions {
            engine: Engine::Tree,
            leaf_size: Some(1),
            ..Default::default()
        },
        BuildOptions {
            engine: Engine::Tree,
            leaf_size: Some(1),
            spfac: Some(0.0),
            partition: false,
            ..Default::default()
        },
        BuildOptions {
            engine: Engine::Tree,
            leaf_size: Some(1),
            max_memory: 2048,
            ..Default::default()
        },
    ];
    for opts in &configs {
        let c = Classifier::build(&list, opts).expect("compiles");
        for (p, bits) in &packets {
            let want = list.classify(p, bits);
            let got = c.classify(p, bits);
            assert_eq!(got, want, "{opts:?} {p}\n{}", c.explain());
        }
        // The batch path (the fast path's lock-step walk on pure lists).
        let keys: Vec<KeyWords> = packets
            .iter()
            .map(|(p, b)| KeyWords::from_bits(p, b))
            .collect();
        let mut ids = vec![0u32; keys.len()];
        c.classify_batch_ids(&keys, &mut ids);
        for ((p, bits), id) in packets.iter().zip(&ids) {
            assert_eq!(*id, list.classify(p, bits).rule_id, "{opts:?} batch {p}");
        }
    }
}

/// Loads `data` as an image (after fixing its checksum, so mutations get
/// past it) and walks every packet through whatever loads. Must not panic.
pub fn check_image(data: &[u8]) {
    let mut words: Vec<u32> = data
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    if words.len() > hw::CHECKSUM {
        words[hw::CHECKSUM] = image::checksum(&words);
    }
    if let Ok(img) = Image::from_words(words) {
        let c = Classifier::from_image(img);
        let mut b = Bytes(data);
        for _ in 0..16 {
            let p = Packet::v4(
                b.byte() as u32,
                b.byte() as u32,
                b.byte(),
                b.byte() as u16,
                b.byte() as u16,
            );
            let key = KeyWords::new(&p, b.byte() as u64);
            let _ = c.classify_key(&key);
            let _ = c.classify_id(&key);
            let mut id = [0u32];
            c.classify_batch_ids(&[key], &mut id);
        }
    }
}
