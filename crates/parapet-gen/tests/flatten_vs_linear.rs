//! The flattened decision list must give exactly the linear engine's
//! decision — deciding rule, verdict and non-terminal rules — for every
//! packet, on rulesets with jumps, gotos, RETURNs, LOGs and sets.

use parapet_gen::*;
use parapet_model::*;

/// Set membership from precomputed bits, so both engines see the same sets.
struct Bits<'a>(&'a Ruleset, &'a [bool]);

impl SetLookup for Bits<'_> {
    fn contains(&self, set_ref: &SetRef, _: &Packet) -> bool {
        let i = self.0.set_refs.iter().position(|r| r == set_ref).unwrap();
        self.1[i]
    }
}

#[test]
fn flatten_matches_linear_on_random_rulesets() {
    let mut checked = 0;
    let mut jumped = 0;
    for seed in 0..300u64 {
        let spec = RandomSpec {
            rules: 5 + (seed as usize % 60),
            user_chains: (seed % 5) as usize,
            set_refs: (seed % 3) as usize,
            ..Default::default()
        };
        let rs = random_ruleset(seed, &spec);
        let start = rs.select_chain(None).unwrap();
        let linear = LinearEngine::new(&rs, start).unwrap();
        let list = flatten(&rs, start).unwrap();
        for (i, pkt) in packets_for(&rs, seed, 200).iter().enumerate() {
            let bits = set_bits(seed, i, rs.set_refs.len());
            let want = linear.classify(pkt, &Bits(&rs, &bits)).unwrap();
            let got = list.classify(pkt, &bits);
            assert_eq!(got, want, "seed {seed}, packet {pkt}");
            checked += 1;
            jumped += (want.nonterminal.len() > 1) as usize;
        }
    }
    // The generator must actually exercise control flow, or this test
    // proves nothing.
    assert!(
        checked == 60_000 && jumped > 1_000,
        "only {jumped} packets took non-terminal paths"
    );
}

#[test]
fn goto_skips_the_rest_of_the_calling_chain() {
    // INPUT: goto A (port 22); then ACCEPT. A: RETURN. Policy DROP.
    // A packet to port 22 returns from A past INPUT's remaining rules to
    // the policy, as iptables does: goto does not push a return address.
    let mut m22 = Matches::any();
    m22.constrain(Field::DstPort, IntervalSet::point(22));
    let mut rs = one_chain(
        vec![
            Rule::new(0, m22, Action::Goto("A".into())),
            Rule::new(0, Matches::any(), Action::Verdict(Verdict::Accept)),
        ],
        Verdict::Drop,
    );
    rs.tables[0].chains.push(Chain {
        name: "A".into(),
        base: None,
        rules: vec![Rule::new(0, Matches::any(), Action::Return)],
    });
    rs.renumber();
    let start = rs.select_chain(None).unwrap();
    let pkt = Packet::v4(1, 2, 6, 1, 22);
    let want = Decision {
        rule_id: 0,
        verdict: Verdict::Drop,
        nonterminal: vec![1, 3],
    };
    assert_eq!(
        LinearEngine::new(&rs, start)
            .unwrap()
            .classify(&pkt, &NoSets)
            .unwrap(),
        want
    );
    assert_eq!(flatten(&rs, start).unwrap().classify(&pkt, &[]), want);
    let other = Packet::v4(1, 2, 6, 1, 23);
    assert_eq!(
        flatten(&rs, start).unwrap().classify(&other, &[]).rule_id,
        2
    );
}

#[test]
fn loops_are_rejected() {
    let mut rs = one_chain(
        vec![Rule::new(0, Matches::any(), Action::Jump("A".into()))],
        Verdict::Drop,
    );
    rs.tables[0].chains.push(Chain {
        name: "A".into(),
        base: None,
        rules: vec![Rule::new(0, Matches::any(), Action::Jump("A".into()))],
    });
    let start = rs.select_chain(None).unwrap();
    assert!(matches!(flatten(&rs, start), Err(FlattenError::Loop(_))));
    assert_eq!(
        LinearEngine::new(&rs, start)
            .unwrap()
            .classify(&Packet::v4(1, 2, 6, 1, 1), &NoSets),
        Err(EvalError::TooDeep)
    );
}

#[test]
fn inlining_blowup_is_bounded() {
    // Each chain jumps twice to the next: 2^20 copies of the last chain.
    let mut rs = one_chain(
        vec![Rule::new(0, Matches::any(), Action::Jump("c0".into()))],
        Verdict::Drop,
    );
    for i in 0..20 {
        let next = format!("c{}", i + 1);
        rs.tables[0].chains.push(Chain {
            name: format!("c{i}"),
            base: None,
            rules: vec![
                Rule::new(0, Matches::any(), Action::Jump(next.clone())),
                Rule::new(0, Matches::any(), Action::Jump(next)),
            ],
        });
    }
    rs.tables[0].chains.push(Chain {
        name: "c20".into(),
        base: None,
        rules: vec![Rule::new(0, Matches::any(), Action::Count)],
    });
    rs.renumber();
    let start = rs.select_chain(None).unwrap();
    assert_eq!(
        flatten_with_limit(&rs, start, 10_000),
        Err(FlattenError::TooLarge { limit: 10_000 })
    );
}
