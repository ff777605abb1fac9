//! TCP option areas and `--tcp-option` rulesets for the engines'
//! differential tests (`Field::TcpOption`, the walk of
//! `parapet_model::tcp_option`): areas that are well formed, NOP-padded,
//! cut short by End of Option List, or malformed where the kernel's walk
//! answers something a validating parser would not (lengths of 0 and 1, a
//! length past the area, a kind in the last byte), and rules testing the
//! boundary kinds, `!` included.

use parapet_model::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// The kinds the rules test: both ends of each bitmap half, the
/// single-byte kinds, common options and a few others.
pub const KINDS: [u8; 14] = [0, 1, 2, 3, 4, 5, 8, 30, 77, 127, 128, 200, 254, 255];

/// A random option area (what follows the fixed TCP header: a multiple of
/// 4 bytes, at most 40, as a data offset makes it).
pub fn option_area(rng: &mut SmallRng) -> Vec<u8> {
    let words = rng.gen_range(0..=10usize);
    let len = 4 * words;
    let mut area = Vec::with_capacity(len);
    while area.len() < len {
        let kind = KINDS[rng.gen_range(0..KINDS.len())];
        match rng.gen_range(0..10) {
            // padding and End of Option List
            0 | 1 => area.push(rng.gen_range(0..=1)),
            // well formed: kind, length, value bytes (value bytes that
            // equal a tested kind are never read as kinds)
            2..=5 => {
                let body = rng.gen_range(0..=6usize);
                area.push(kind);
                area.push(2 + body as u8);
                area.extend((0..body).map(|_| KINDS[rng.gen_range(0..KINDS.len())]));
            }
            // a length of 0 or 1
            6 => area.extend([kind, rng.gen_range(0..=1)]),
            // a length running past the area
            7 => area.extend([kind, rng.gen_range(20..=255)]),
            // any byte
            _ => area.push(rng.gen()),
        }
    }
    area.truncate(len);
    // sometimes a kind in the last byte, whose length byte is past the area
    if len > 0 && rng.gen_bool(0.2) {
        area[len - 1] = KINDS[rng.gen_range(0..KINDS.len())];
    }
    area
}

/// A chain of `n` rules, each testing one to three of [`KINDS`] (present
/// or `!`), some also the protocol or a port; ACCEPT or DROP, either
/// policy.
pub fn tcp_option_ruleset(seed: u64, n: usize) -> Ruleset {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x7c9_0b71_0000_0040);
    let rules = (0..n)
        .map(|i| {
            let mut m = Matches::any();
            if rng.gen_bool(0.8) {
                m.constrain(Field::Proto, IntervalSet::point(6));
            }
            if rng.gen_bool(0.3) {
                m.constrain(Field::DstPort, IntervalSet::range(20, 25));
            }
            for _ in 0..rng.gen_range(1..=3) {
                let kind = KINDS[rng.gen_range(0..KINDS.len())];
                m.constrain(
                    Field::TcpOption(kind),
                    IntervalSet::point(rng.gen_bool(0.6) as u128),
                );
            }
            let v = if rng.gen_bool(0.5) {
                Verdict::Accept
            } else {
                Verdict::Drop
            };
            Rule::new(i as u32 + 1, m, Action::Verdict(v))
        })
        .collect();
    let policy = if rng.gen_bool(0.5) {
        Verdict::Accept
    } else {
        Verdict::Drop
    };
    crate::one_chain(rules, policy)
}

/// `count` packets for [`tcp_option_ruleset`]: TCP segments of both
/// families with random option areas (some without options), to ports 20
/// to 26, and a few UDP datagrams.
pub fn tcp_option_packets(seed: u64, count: usize) -> Vec<Packet> {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x7c9_0b71_0000_0041);
    (0..count)
        .map(|_| {
            let tcp = rng.gen_bool(0.9);
            let proto = if tcp { 6 } else { 17 };
            let dport = rng.gen_range(20..=26);
            let mut p = if rng.gen_bool(0.5) {
                Packet::v4(0x0a00_0001, 0x0a00_0002, proto, 40000, dport)
            } else {
                Packet::new(
                    Family::V6,
                    0x2001_0db8 << 96 | 1,
                    0x2001_0db8 << 96 | 2,
                    proto,
                    40000,
                    dport,
                )
            };
            if tcp {
                p.tcp_flags = 0x02;
                let area = option_area(&mut rng);
                p.tcp_options = (!area.is_empty()).then(|| area.into_boxed_slice());
            }
            p
        })
        .collect()
}
