//! `diff`'s bound on the bytes of differing pieces it holds for merging
//! (`diff_holding`): past the bound they are merged in place, and when
//! that leaves more than three quarters of the bound the comparison stops with the rest not proven.
//! Either way every reported box must be a real difference, and a report
//! with nothing unproven must hold exactly the differing packets — checked
//! against the linear engine, with bounds small enough that both paths run
//! on small random rulesets.

mod common;

use common::*;
use parapet_gen::*;
use parapet_model::*;

/// The bytes of a piece of the lists' space whose sides are one range
/// each (the bounds below are a number of such pieces).
fn piece_bytes(a: &DecisionList, b: &DecisionList) -> usize {
    let space = Space::of(a.entries.iter().chain(&b.entries).map(|e| &e.matches)).unwrap();
    space.universe().cubes()[0].bytes()
}

fn spec(seed: u64) -> RandomSpec {
    RandomSpec {
        rules: 8 + (seed as usize % 25),
        user_chains: (seed % 4) as usize,
        ..Default::default()
    }
}

#[test]
fn a_bounded_diff_reports_only_differences_and_all_of_them_when_complete() {
    let (mut stopped, mut points) = (0, 0);
    for seed in 0..300u64 {
        let a = random_ruleset(seed, &spec(seed));
        let b = mutate(&a, seed);
        let (la, lb) = (list(&a), list(&b));
        let whole = diff(&la, &lb, budget()).unwrap();
        if !whole.unproven.is_empty() || la.policy != lb.policy {
            continue;
        }
        let max_held = (4 + (seed % 13) as usize) * piece_bytes(&la, &lb);
        let bounded = diff_holding(&la, &lb, budget(), max_held).unwrap();
        let ea = LinearEngine::new(&a, a.select_chain(None).unwrap()).unwrap();
        let eb = LinearEngine::new(&b, b.select_chain(None).unwrap()).unwrap();
        let space = Space::of(la.entries.iter().chain(&lb.entries).map(|e| &e.matches)).unwrap();
        for d in &bounded.differences {
            let (da, db) = (
                ea.classify(&d.witness, &NoSets).unwrap(),
                eb.classify(&d.witness, &NoSets).unwrap(),
            );
            assert_ne!(da.verdict, db.verdict, "seed {seed}: {}", d.witness);
            assert_eq!((da.rule_id, db.rule_id), (d.a.0, d.b.0), "seed {seed}");
        }
        let complete = bounded.unproven.is_empty();
        if !complete {
            stopped += 1;
        }
        for pkt in packets(&a, seed, 150) {
            let inside: Vec<&Difference> = bounded
                .differences
                .iter()
                .filter(|d| space.contains(&d.cube, &pkt))
                .collect();
            assert!(inside.len() <= 1, "seed {seed}: {pkt} in several boxes");
            let (da, db) = (
                ea.classify(&pkt, &NoSets).unwrap(),
                eb.classify(&pkt, &NoSets).unwrap(),
            );
            if let Some(d) = inside.first() {
                assert_ne!(da.verdict, db.verdict, "seed {seed}: {pkt}");
                assert_eq!((da.rule_id, db.rule_id), (d.a.0, d.b.0), "seed {seed}");
            } else if complete {
                assert_eq!(da.verdict, db.verdict, "seed {seed}: {pkt} left out");
            }
            points += 1;
        }
    }
    assert!(
        stopped > 10 && points > 10_000,
        "{stopped} stopped, {points} points"
    );
}

/// The default bound is far above what a small list holds: the report is
/// the one an unbounded merge at the end writes, box for box.
#[test]
fn the_default_bound_leaves_small_reports_unchanged() {
    for seed in 0..100u64 {
        let a = random_ruleset(seed, &spec(seed));
        let b = mutate(&a, seed);
        let (la, lb) = (list(&a), list(&b));
        let bounded = diff(&la, &lb, budget()).unwrap();
        let unbounded = diff_holding(&la, &lb, budget(), usize::MAX).unwrap();
        assert_eq!(bounded, unbounded, "seed {seed}");
    }
}

/// Rule `k` of `n`: TCP from 10.0.0.k, accepted.
fn tcp_from(k: u32) -> Rule {
    let mut m = Matches::default();
    m.constrain(Field::Family, IntervalSet::point(4));
    m.constrain(Field::Proto, IntervalSet::point(6));
    m.constrain(Field::SrcAddr, IntervalSet::point(0x0a00_0000 + k as u128));
    Rule::new(0, m, Action::Verdict(Verdict::Accept))
}

fn input(rules: Vec<Rule>) -> Ruleset {
    let mut rs = Ruleset {
        tables: vec![Table {
            name: "filter".into(),
            family: TableFamily::Ip,
            chains: vec![Chain {
                name: "INPUT".into(),
                base: Some(BaseChain {
                    hook: Hook::Input,
                    priority: 0,
                    policy: Verdict::Accept,
                    counters: Counters::default(),
                }),
                rules,
            }],
        }],
        set_refs: Vec::new(),
        left_to_kernel: Vec::new(),
    };
    rs.renumber();
    rs
}

/// Twenty rules each taking TCP from one address, then A drops the rest
/// and B lets it through: the drop's region comes as 21 pieces (one per
/// address, not TCP, and the others), which merge into two boxes. With a
/// bound of 8 they pass it and are merged in place, and the comparison
/// goes on to the end: nothing unproven, exactly the packets that differ.
#[test]
fn pieces_merged_in_place_go_on_to_a_complete_answer() {
    let rules: Vec<Rule> = (1..=20).map(tcp_from).collect();
    let b = input(rules.clone());
    let mut with_drop = rules;
    with_drop.push(Rule::new(
        0,
        Matches::default(),
        Action::Verdict(Verdict::Drop),
    ));
    let a = input(with_drop);
    let (la, lb) = (list(&a), list(&b));
    let piece = piece_bytes(&la, &lb);
    let bounded = diff_holding(&la, &lb, budget(), 8 * piece).unwrap();
    assert!(bounded.unproven.is_empty(), "{:?}", bounded.unproven);
    // Over the bound with nothing merged in place: stopped.
    let stopped = diff_holding(&la, &lb, budget(), piece).unwrap();
    assert!(!stopped.unproven.is_empty());
    let ea = LinearEngine::new(&a, a.select_chain(None).unwrap()).unwrap();
    let eb = LinearEngine::new(&b, b.select_chain(None).unwrap()).unwrap();
    let space = Space::of(la.entries.iter().chain(&lb.entries).map(|e| &e.matches)).unwrap();
    let mut probes = packets(&a, 7, 400);
    for k in 0..=21u32 {
        for proto in [6u8, 17] {
            probes.push(Packet::v4(0x0a00_0000 + k, 1, proto, 1000, 80));
        }
    }
    for pkt in &probes {
        let inside = bounded
            .differences
            .iter()
            .filter(|d| space.contains(&d.cube, pkt))
            .count();
        let (da, db) = (
            ea.classify(pkt, &NoSets).unwrap(),
            eb.classify(pkt, &NoSets).unwrap(),
        );
        assert_eq!(inside, (da.verdict != db.verdict) as usize, "{pkt}");
    }
}
