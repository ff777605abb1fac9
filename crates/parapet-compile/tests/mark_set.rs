//! Mark changes (`-j MARK`, nft `meta mark set`) followed by mark matches:
//! the linear engine changes the packet's mark mid-walk; the flattened
//! list (rewritten by `mark_resolve.rs`) and every compiled engine must
//! decide the same packets the same way — deciding rule, non-terminal
//! rules, verdict and the mark change the decision carries — on random
//! rulesets with jumps, gotos and RETURNs where some rules change the mark
//! and others match it (intervals and masked comparisons).

mod common;

use common::*;
use parapet_compile::*;
use parapet_gen::*;
use parapet_model::*;
use proptest::prelude::*;

/// Marks the generated rules set and match: few bits, so changes and
/// matches meet often.
const MARK_BITS: [u32; 5] = [0x1, 0x2, 0x10, 0x4_0000, 0x8000_0000];

fn bits(pick: u8) -> u32 {
    MARK_BITS
        .iter()
        .enumerate()
        .filter(|(k, _)| pick >> k & 1 == 1)
        .fold(0, |a, (_, b)| a | b)
}

/// What to do to one rule: nothing, a mark change (`kind` 0-4: each
/// iptables form), or a mark match (`kind` 5-7: a point, a range, a
/// masked comparison).
type Touch = (u8, u8, u8, u8);

fn touch(rule: &mut Rule, (kind, a, b, negate): Touch) {
    let (a, b) = (bits(a), bits(b));
    match kind {
        0 => rule.set_mark = Some(MarkSet::xmark(a, b)),
        1 => rule.set_mark = Some(MarkSet::set(a, if b == 0 { u32::MAX } else { b })),
        2 => rule.set_mark = Some(MarkSet::and(!a)),
        3 => rule.set_mark = Some(MarkSet::or(a)),
        4 => rule.set_mark = Some(MarkSet::xor(a)),
        5 => rule
            .matches
            .constrain(Field::Mark, IntervalSet::point(a as u128)),
        6 => rule.matches.constrain(
            Field::Mark,
            IntervalSet::range(a.min(b) as u128, a.max(b) as u128),
        ),
        _ => rule.matches.constrain_masked(MaskedMatch {
            field: Field::Mark,
            mask: (a | b) as u128,
            value: a as u128,
            negate: negate % 3 == 0,
        }),
    }
}

fn check(seed: u64, touches: &[Touch], control_flow: bool) -> Result<usize, TestCaseError> {
    let spec = RandomSpec {
        rules: 6 + (seed as usize % 30),
        user_chains: (seed % 3) as usize,
        set_refs: 0,
        ipv6: seed.is_multiple_of(2),
        control_flow,
    };
    let mut rs = random_ruleset(seed, &spec);
    let mut k = 0;
    for t in &mut rs.tables {
        for c in &mut t.chains {
            for r in &mut c.rules {
                if let Some(&x) = touches.get(k) {
                    if x.0 < 8 {
                        touch(r, x);
                    }
                }
                k += 1;
            }
        }
    }
    let start = rs.select_chain(None).unwrap();
    let linear = LinearEngine::new(&rs, start).unwrap();
    let list = match flatten(&rs, start) {
        Ok(l) => l,
        // the rewrite's documented bound: refused, never wrong
        Err(FlattenError::Mark(_)) => return Ok(0),
        Err(e) => panic!("seed {seed}: {e}"),
    };
    let mut packets = packets_for(&rs, seed, 60);
    for (i, p) in packets.iter_mut().enumerate() {
        p.mark = bits((seed as usize + i * 7) as u8 % 32) ^ (i as u32 & 3);
    }
    let mut changed = 0;
    for (name, opts) in configs() {
        let c = Classifier::build(&list, &opts).unwrap();
        for (i, pkt) in packets.iter().enumerate() {
            let want = linear.classify(pkt, &NoSets).unwrap();
            prop_assert_eq!(
                &list.classify(pkt, &[]),
                &want,
                "flat, seed {}, packet {}: {}",
                seed,
                i,
                pkt
            );
            prop_assert_eq!(
                &c.classify(pkt, &[]),
                &want,
                "{}, seed {}, packet {}: {}",
                name,
                seed,
                i,
                pkt
            );
            changed += want.mark.is_some() as usize;
        }
    }
    Ok(changed)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn mark_changes_agree_with_linear_in_every_engine(
        seed in 0u64..10_000,
        touches in prop::collection::vec((0u8..14, 0u8..32, 0u8..32, 0u8..6), 0..40),
        control_flow in any::<bool>(),
    ) {
        check(seed, &touches, control_flow)?;
    }
}

/// The generated cases do exercise the rewrite: many packets are decided
/// after a mark change, and some lists grow copies.
#[test]
fn the_cases_change_marks_and_fork() {
    let (mut changed, mut forked) = (0, 0);
    for seed in 0..60u64 {
        let touches: Vec<Touch> = (0..40u64)
            .map(|k| {
                let x = seed.wrapping_mul(0x9e37_79b9).wrapping_add(k * 0x85eb_ca6b) >> 7;
                (
                    (x % 10) as u8,
                    (x >> 8) as u8 % 32,
                    (x >> 16) as u8 % 32,
                    (x >> 24) as u8 % 6,
                )
            })
            .collect();
        changed += check(seed, &touches, seed.is_multiple_of(2)).unwrap();
        let spec = RandomSpec {
            rules: 6 + (seed as usize % 30),
            user_chains: (seed % 3) as usize,
            set_refs: 0,
            ipv6: seed.is_multiple_of(2),
            control_flow: seed.is_multiple_of(2),
        };
        let mut rs = random_ruleset(seed, &spec);
        let mut k = 0;
        for t in &mut rs.tables {
            for c in &mut t.chains {
                for r in &mut c.rules {
                    if touches[k % 40].0 < 8 {
                        touch(r, touches[k % 40]);
                    }
                    k += 1;
                }
            }
        }
        let start = rs.select_chain(None).unwrap();
        let raw = flatten_marks_unresolved(&rs, start, DEFAULT_MAX_ENTRIES).unwrap();
        if let Ok(list) = flatten_unpruned(&rs, start, DEFAULT_MAX_ENTRIES) {
            forked += (list.entries.len() > raw.entries.len()) as usize;
        }
    }
    assert!(changed > 500, "only {changed} decisions changed a mark");
    assert!(forked > 10, "only {forked} of 60 lists were rewritten");
}

/// PAYS0N's router (corpus): `-j MARK --set-xmark 0x40000/0xff0000` on
/// tailscale0's packets, then `-m mark --mark 0x40000/0xff0000 -j ACCEPT`.
#[test]
fn a_marked_packet_is_accepted_by_the_mark_match_after_it() {
    let mut mark_rule = Rule::new(1, Matches::any(), Action::Count);
    mark_rule.set_mark = Some(MarkSet::xmark(0x40000, 0xff0000));
    mark_rule.matches.constrain(
        Field::InIface,
        IntervalSet::point(IfName::new("tailscale0").unwrap().0),
    );
    let mut accept = Matches::any();
    accept.constrain_masked(MaskedMatch {
        field: Field::Mark,
        mask: 0xff0000,
        value: 0x40000,
        negate: false,
    });
    let rs = Ruleset {
        tables: vec![Table {
            name: "filter".into(),
            family: TableFamily::Ip,
            chains: vec![Chain {
                name: "FORWARD".into(),
                base: Some(BaseChain {
                    hook: Hook::Forward,
                    priority: 0,
                    policy: Verdict::Drop,
                    counters: Counters::default(),
                }),
                rules: vec![
                    mark_rule,
                    Rule::new(2, accept, Action::Verdict(Verdict::Accept)),
                ],
            }],
        }],
        set_refs: vec![],
        left_to_kernel: vec![],
    };
    let start = rs.select_chain(Some("FORWARD")).unwrap();
    let list = flatten(&rs, start).unwrap();
    let c = Classifier::build(&list, &BuildOptions::default()).unwrap();
    let mut pkt = Packet::v4(1, 2, 6, 1000, 22);
    for (iface, mark, rule, verdict) in [
        ("tailscale0", 0, 2, Verdict::Accept),
        ("tailscale0", 0x12ff_0001, 2, Verdict::Accept),
        ("eth0", 0, 0, Verdict::Drop),
        ("eth0", 0x0004_0000, 2, Verdict::Accept),
    ] {
        pkt.iif = IfName::new(iface).unwrap();
        pkt.mark = mark;
        let d = c.classify(&pkt, &[]);
        assert_eq!(
            (d.rule_id, d.verdict.clone()),
            (rule, verdict),
            "{iface} {mark:#x}"
        );
        assert_eq!(
            d,
            LinearEngine::new(&rs, start)
                .unwrap()
                .classify(&pkt, &NoSets)
                .unwrap()
        );
        let new = d.mark.map_or(mark, |m| m.apply(mark));
        let want = if iface == "tailscale0" {
            (mark & !0xff0000) | 0x40000
        } else {
            mark
        };
        assert_eq!(new, want);
    }
}
