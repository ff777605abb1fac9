//! `diff`'s shortcut: a piece of A decided by an entry common to both
//! lists, with no changed entry before it (in A, or before its partner in
//! B) meeting the piece, is not searched in B (`same_decider.rs`). These
//! tests aim at the two ways the shortcut could be wrong — a changed entry
//! of B before the common entry's partner that takes some of the piece, and
//! a changed RETURN of A that sends the piece to the common entry — by hand
//! and on random rulesets, against the linear engine and the comparison of
//! every region. A shortcut that skips either check fails them.

mod common;

use common::*;
use parapet_gen::*;
use parapet_model::*;

fn tcp_dports(lo: u16, hi: u16) -> Matches {
    let mut m = Matches::default();
    m.constrain(Field::Family, IntervalSet::point(4));
    m.constrain(Field::Proto, IntervalSet::point(6));
    m.constrain(Field::DstPort, IntervalSet::range(lo as u128, hi as u128));
    m
}

fn verdict(v: Verdict) -> Action {
    Action::Verdict(v)
}

/// An IPv4 filter table with policy ACCEPT: INPUT first, then user chains.
fn ruleset(chains: Vec<(&str, Vec<(Matches, Action)>)>) -> Ruleset {
    let chains = chains
        .into_iter()
        .enumerate()
        .map(|(k, (name, rules))| Chain {
            name: name.into(),
            base: (k == 0).then(|| BaseChain {
                hook: Hook::Input,
                priority: 0,
                policy: Verdict::Accept,
                counters: Counters::default(),
            }),
            rules: rules.into_iter().map(|(m, a)| Rule::new(0, m, a)).collect(),
        })
        .collect();
    let mut rs = Ruleset {
        tables: vec![Table {
            name: "filter".into(),
            family: TableFamily::Ip,
            chains,
        }],
        set_refs: Vec::new(),
        left_to_kernel: Vec::new(),
    };
    rs.renumber();
    rs
}

/// The one box `diff` reports: its destination ports and its two verdicts.
fn only_difference(a: &Ruleset, b: &Ruleset) -> (IntervalSet, Verdict, Verdict) {
    let (la, lb) = (list(a), list(b));
    let report = diff(&la, &lb, budget()).unwrap();
    assert!(report.unproven.is_empty());
    assert_eq!(report.differences.len(), 1, "{:?}", report.differences);
    let d = &report.differences[0];
    let ea = LinearEngine::new(a, a.select_chain(None).unwrap()).unwrap();
    let eb = LinearEngine::new(b, b.select_chain(None).unwrap()).unwrap();
    assert_eq!(ea.classify(&d.witness, &NoSets).unwrap().verdict, d.a.1);
    assert_eq!(eb.classify(&d.witness, &NoSets).unwrap().verdict, d.b.1);
    let space = Space::of(la.entries.iter().chain(&lb.entries).map(|e| &e.matches)).unwrap();
    let port = space.dims().iter().position(|&f| f == Field::DstPort);
    let ports = d.cube.sides()[port.unwrap()].clone();
    (ports, d.a.1.clone(), d.b.1.clone())
}

/// B adds a DROP for ports 80-90 before A's ACCEPT of port 80: port 80 is
/// decided in A by the ACCEPT, a common entry, and the new DROP (before
/// the ACCEPT's partner in B) takes it. Ports 81-90 are dropped by both.
#[test]
fn a_changed_entry_of_b_before_the_common_decider_is_searched() {
    let a = ruleset(vec![(
        "INPUT",
        vec![
            (tcp_dports(80, 80), verdict(Verdict::Accept)),
            (tcp_dports(0, 100), verdict(Verdict::Drop)),
        ],
    )]);
    let b = ruleset(vec![(
        "INPUT",
        vec![
            (tcp_dports(80, 90), verdict(Verdict::Drop)),
            (tcp_dports(80, 80), verdict(Verdict::Accept)),
            (tcp_dports(0, 100), verdict(Verdict::Drop)),
        ],
    )]);
    let (ports, va, vb) = only_difference(&a, &b);
    assert_eq!(ports, IntervalSet::point(80));
    assert_eq!((va, vb), (Verdict::Accept, Verdict::Drop));
}

/// A's chain C returns port 80 before its DROP, so A's ACCEPT after the
/// jump (a common entry) decides port 80; B's C has no RETURN and drops it.
/// The changed RETURN is before the common decider in A.
#[test]
fn a_changed_return_of_a_before_the_common_decider_is_searched() {
    let chain_c = |with_return: bool| {
        let mut rules = Vec::new();
        if with_return {
            rules.push((tcp_dports(80, 80), Action::Return));
        }
        rules.push((tcp_dports(0, 100), verdict(Verdict::Drop)));
        rules
    };
    let input = || {
        vec![
            (Matches::default(), Action::Jump("C".into())),
            (tcp_dports(80, 80), verdict(Verdict::Accept)),
        ]
    };
    let a = ruleset(vec![("INPUT", input()), ("C", chain_c(true))]);
    let b = ruleset(vec![("INPUT", input()), ("C", chain_c(false))]);
    let (ports, va, vb) = only_difference(&a, &b);
    assert_eq!(ports, IntervalSet::point(80));
    assert_eq!((va, vb), (Verdict::Accept, Verdict::Drop));
}

/// A rule of B that is new and shadowed by common rules changes nothing:
/// the pieces of its box are decided by common entries with no changed
/// entry before them (the case the shortcut answers without searching B).
#[test]
fn a_new_rule_shadowed_by_common_rules_changes_nothing() {
    let rules = || {
        vec![
            (tcp_dports(80, 80), verdict(Verdict::Accept)),
            (tcp_dports(0, 100), verdict(Verdict::Drop)),
        ]
    };
    let a = ruleset(vec![("INPUT", rules())]);
    let mut b_rules = rules();
    b_rules.push((tcp_dports(50, 90), verdict(Verdict::Accept)));
    let b = ruleset(vec![("INPUT", b_rules)]);
    let report = diff(&list(&a), &list(&b), budget()).unwrap();
    assert!(report.equivalent(), "{:?}", report.differences);
}

/// A rule of `rs`'s chain `chain` at `at` (modulo its length).
fn rule_at(rs: &Ruleset, chain: usize, at: usize) -> Option<&Rule> {
    let rules = &rs.tables[0].chains[chain].rules;
    (!rules.is_empty()).then(|| &rules[at % rules.len()])
}

/// `rs` with `rule` inserted into chain `chain` at `at` (modulo its length
/// + 1), renumbered.
fn inserted(rs: &Ruleset, chain: usize, at: usize, rule: (Matches, Action)) -> Ruleset {
    let mut out = rs.clone();
    let rules = &mut out.tables[0].chains[chain].rules;
    let at = at % (rules.len() + 1);
    rules.insert(at, Rule::new(0, rule.0, rule.1));
    out.renumber();
    out
}

/// Random rulesets (flat, and with jumps, gotos and RETURNs) and a copy
/// with one rule added early in a chain: the match of a later rule of that
/// chain with another verdict, so it takes packets that common rules
/// between the two decide in A. And copies whose user chain gains a
/// RETURN with another rule's match, so common entries after the jump
/// decide packets that A's chain returned. Both against the linear engine
/// and the comparison of every region.
#[test]
fn diff_with_rules_added_before_common_deciders_is_exact() {
    let (mut boxes, mut points, mut returns) = (0, 0, 0);
    for seed in 0..300u64 {
        let spec = RandomSpec {
            rules: 6 + (seed as usize % 30),
            user_chains: (seed % 3) as usize,
            ipv6: seed % 4 == 0,
            control_flow: seed % 2 == 0,
            ..Default::default()
        };
        let a = random_ruleset(seed, &spec);
        let chains = a.tables[0].chains.len();
        let chain = (seed as usize / 2) % chains;
        let n = a.tables[0].chains[chain].rules.len();
        let at = (seed as usize * 7) % (n / 2 + 1);
        let Some(later) = rule_at(&a, chain, at + 1 + (seed as usize * 5) % n.max(1)) else {
            continue;
        };
        let (a, b) = if chain > 0 && (seed / 3) % 2 == 0 {
            // A's user chain returns another rule's packets half way down.
            returns += 1;
            let ret = (later.matches.clone(), Action::Return);
            (inserted(&a, chain, at, ret), a.clone())
        } else {
            let v = match &later.action {
                Action::Verdict(Verdict::Accept) => Verdict::Drop,
                _ => Verdict::Accept,
            };
            let early = (later.matches.clone(), verdict(v));
            (a.clone(), inserted(&a, chain, at, early))
        };
        if list(&a).policy != list(&b).policy {
            continue;
        }
        let (b_, p_) = changed_rules_path_is_exact(&a, &b, seed);
        (boxes, points) = (boxes + b_, points + p_);
    }
    assert!(
        boxes > 300 && points > 20_000 && returns > 20,
        "{boxes} boxes, {points} points, {returns} with a RETURN added"
    );
}
