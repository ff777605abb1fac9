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
        mark: None,
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

#[test]
fn pruning_repeated_rules_keeps_every_decision() {
    let mut pruned = 0;
    for seed in 0..200u64 {
        // Copies of earlier rules, later in the chain: the copies of
        // terminal rules are unreachable and pruned; copies of LOG rules are
        // not (they are not decided by their original).
        // Odd seeds: chains, jumps and RETURNs (pruning must stay off
        // where a RETURN could skip the original); even seeds: plain rules
        // with LOGs, where it applies.
        let plain = seed % 2 == 0;
        let spec = RandomSpec {
            rules: 30,
            user_chains: if plain { 0 } else { 2 },
            control_flow: !plain,
            ..Default::default()
        };
        let mut rs = random_ruleset(seed, &spec);
        let base = rs.tables[0].chains[0].rules.clone();
        for (k, r) in base.iter().enumerate().filter(|(k, _)| k % 3 == 0) {
            let rules = &mut rs.tables[0].chains[0].rules;
            let at = (k + 5).min(rules.len());
            rules.insert(at, r.clone());
        }
        rs.renumber();
        let start = rs.select_chain(None).unwrap();
        let linear = LinearEngine::new(&rs, start).unwrap();
        let list = flatten(&rs, start).unwrap();
        for pkt in packets_for(&rs, seed, 200) {
            assert_eq!(
                list.classify(&pkt, &[]),
                linear.classify(&pkt, &NoSets).unwrap(),
                "seed {seed}, packet {pkt}"
            );
        }
        let unpruned_len = rs.tables[0]
            .chains
            .iter()
            .map(|c| c.rules.len())
            .sum::<usize>();
        pruned += (list.entries.len() < unpruned_len) as usize;
    }
    assert!(pruned > 50, "pruning happened in only {pruned} rulesets");
}

#[test]
fn identical_rules_collapse_to_one_entry() {
    let mut m = Matches::any();
    m.constrain(Field::SrcAddr, IntervalSet::point(0x0102_0304));
    m.constrain(Field::DstAddr, IntervalSet::point(0x0102_0304));
    let mut rules: Vec<Rule> = (0..1000)
        .map(|_| Rule::new(0, m.clone(), Action::Verdict(Verdict::Drop)))
        .collect();
    rules.push(Rule::new(
        0,
        Matches::any(),
        Action::Verdict(Verdict::Accept),
    ));
    let rs = one_chain(rules, Verdict::Drop);
    let list = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
    assert_eq!(list.entries.len(), 2);
    assert_eq!(list.entries[1].rule_id, 1001);
}

#[test]
fn a_return_that_skips_the_original_keeps_the_copy_alive() {
    // INPUT: 1: -j sub; 2: -d X DROP.   sub: 3: -p tcp RETURN; 4: -d X ACCEPT.
    // Rule 2 repeats rule 4's matches, but a TCP packet to X returns from
    // sub before rule 4 and is decided by rule 2: pruning it would be wrong.
    let mut to_x = Matches::any();
    to_x.constrain(Field::DstAddr, IntervalSet::point(7));
    let mut tcp = Matches::any();
    tcp.constrain(Field::Proto, IntervalSet::point(6));
    let mut rs = one_chain(
        vec![
            Rule::new(0, Matches::any(), Action::Jump("sub".into())),
            Rule::new(0, to_x.clone(), Action::Verdict(Verdict::Drop)),
        ],
        Verdict::Accept,
    );
    rs.tables[0].chains.push(Chain {
        name: "sub".into(),
        base: None,
        rules: vec![
            Rule::new(0, tcp, Action::Return),
            Rule::new(0, to_x, Action::Verdict(Verdict::Accept)),
        ],
    });
    rs.renumber();
    let start = rs.select_chain(None).unwrap();
    let pkt = Packet::v4(1, 7, 6, 1, 1);
    let want = LinearEngine::new(&rs, start)
        .unwrap()
        .classify(&pkt, &NoSets)
        .unwrap();
    assert_eq!(want.rule_id, 2);
    assert_eq!(flatten(&rs, start).unwrap().classify(&pkt, &[]), want);
}
