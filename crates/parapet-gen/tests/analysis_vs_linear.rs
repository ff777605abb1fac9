//! Region analysis against the linear engine: first-match regions, `diff`
//! and `lint` must agree with packet-by-packet classification.

mod common;

use common::*;
use parapet_gen::*;
use parapet_model::*;

fn spec(seed: u64) -> RandomSpec {
    RandomSpec {
        rules: 4 + (seed as usize % 25),
        user_chains: (seed % 4) as usize,
        ..Default::default()
    }
}

#[test]
fn first_match_regions_agree_with_linear() {
    let mut checked = 0;
    for seed in 0..200u64 {
        let rs = random_ruleset(seed, &spec(seed));
        let list = list(&rs);
        let space = Space::of(list.entries.iter().map(|e| &e.matches)).unwrap();
        let walker = Walker::new(&list, &space);
        let Ok(regions) = walker.decided_regions(budget()) else {
            continue;
        };
        let linear = LinearEngine::new(&rs, rs.select_chain(None).unwrap()).unwrap();
        for pkt in packets(&rs, seed, 150) {
            let want = linear.classify(&pkt, &NoSets).unwrap();
            let stops: Vec<Stop> = regions
                .iter()
                .filter(|(_, r)| r.contains(&space, &pkt))
                .map(|(s, _)| *s)
                .collect();
            assert_eq!(stops.len(), 1, "seed {seed}: {pkt} in {stops:?}");
            assert_eq!(walker.rule_id(stops[0]), want.rule_id, "seed {seed}: {pkt}");
            checked += 1;
        }
    }
    assert!(checked > 25_000, "only {checked} packets checked");
}

#[test]
fn diff_witnesses_differ_and_everything_else_agrees() {
    let (mut boxes, mut outside) = (0, 0);
    for seed in 0..200u64 {
        let a = random_ruleset(seed, &spec(seed));
        let b = mutate(&a, seed);
        let (la, lb) = (list(&a), list(&b));
        let report = diff(&la, &lb, budget()).unwrap();
        if !report.unproven.is_empty() {
            continue;
        }
        let ea = LinearEngine::new(&a, a.select_chain(None).unwrap()).unwrap();
        let eb = LinearEngine::new(&b, b.select_chain(None).unwrap()).unwrap();
        let space =
            parapet_model::Space::of(la.entries.iter().chain(&lb.entries).map(|e| &e.matches))
                .unwrap();
        for d in &report.differences {
            let (da, db) = (
                ea.classify(&d.witness, &NoSets).unwrap(),
                eb.classify(&d.witness, &NoSets).unwrap(),
            );
            assert_ne!(da.verdict, db.verdict, "seed {seed}: {}", d.witness);
            assert_eq!((da.rule_id, db.rule_id), (d.a.0, d.b.0), "seed {seed}");
            // The witness round-trips through the --packet syntax.
            assert_eq!(d.witness.to_string().parse::<Packet>().unwrap(), d.witness);
            boxes += 1;
        }
        for pkt in packets(&a, seed, 150) {
            let inside = report
                .differences
                .iter()
                .any(|d| space.contains(&d.cube, &pkt));
            let (da, db) = (
                ea.classify(&pkt, &NoSets).unwrap(),
                eb.classify(&pkt, &NoSets).unwrap(),
            );
            assert_eq!(da.verdict != db.verdict, inside, "seed {seed}: {pkt}");
            outside += !inside as usize;
        }
        assert_eq!(report.equivalent(), report.differences.is_empty());
    }
    assert!(
        boxes > 200 && outside > 10_000,
        "{boxes} boxes, {outside} packets outside"
    );
}

#[test]
fn removing_lint_findings_keeps_every_verdict() {
    let (mut found, mut redundant) = (0, 0);
    for seed in 0..200u64 {
        let mut rs = random_ruleset(seed, &spec(seed));
        // Every other list ends in a catch-all (as ClassBench sets do),
        // which searches settle at once.
        if seed % 2 == 1 {
            let id = rs.rules().map(|r| r.id).max().unwrap_or(0) + 1;
            let chain = rs.select_chain(None).unwrap();
            let verdict = if seed % 4 == 1 {
                Verdict::Accept
            } else {
                Verdict::Drop
            };
            rs.tables[chain.table].chains[chain.chain]
                .rules
                .push(Rule::new(id, Matches::default(), Action::Verdict(verdict)));
        }
        let rs = rs;
        let report = lint(&rs, &[list(&rs)], budget()).unwrap();
        let gone: Vec<u32> = report.findings.iter().map(|f| f.rule).collect();
        found += gone.len();
        redundant += report
            .findings
            .iter()
            .filter(|f| f.kind == FindingKind::Redundant)
            .count();
        let mut pruned = rs.clone();
        for chain in &mut pruned.tables[0].chains {
            chain.rules.retain(|r| !gone.contains(&r.id));
        }
        let e = LinearEngine::new(&rs, rs.select_chain(None).unwrap()).unwrap();
        let p = LinearEngine::new(&pruned, pruned.select_chain(None).unwrap()).unwrap();
        for pkt in packets(&rs, seed, 200) {
            let (d, dp) = (
                e.classify(&pkt, &NoSets).unwrap(),
                p.classify(&pkt, &NoSets).unwrap(),
            );
            assert_eq!(
                d.verdict, dp.verdict,
                "seed {seed}: {pkt}, removed {gone:?}"
            );
            if !gone.contains(&d.rule_id) {
                assert_eq!(d.rule_id, dp.rule_id, "seed {seed}: {pkt}");
            }
        }
        for f in &report.findings {
            if let Some(w) = &f.witness {
                assert_eq!(f.kind, FindingKind::Redundant);
                assert_eq!(
                    e.classify(w, &NoSets).unwrap().rule_id,
                    f.rule,
                    "seed {seed}"
                );
            }
        }
    }
    assert!(
        found > 50 && redundant > 10,
        "{found} findings, {redundant} redundant"
    );
}

/// The depth-first search (which lint and diff use, over the hull index)
/// finds exactly the packets the breadth-first walk does: for every entry,
/// the pieces arriving at it hold the same packets as its first-match
/// region, and, without RETURNs, the first writable one is the walk's
/// witness.
#[test]
fn depth_first_search_agrees_with_the_walk() {
    let mut compared = 0;
    for seed in 0..150u64 {
        let rs = random_ruleset(seed, &spec(seed));
        let list = list(&rs);
        let space = Space::of(list.entries.iter().map(|e| &e.matches)).unwrap();
        let walker = Walker::new(&list, &space);
        let returns = list
            .entries
            .iter()
            .any(|e| matches!(e.kind, EntryKind::Return { .. }));
        let pkts = packets(&rs, seed, 60);
        for i in 0..list.entries.len() {
            let Ok(walked) = walker.reach(i, budget(), &mut |_| {}) else {
                continue;
            };
            let start = walker.universe_within(walker.cube(i));
            let mut pieces = Region::empty();
            walker
                .search(
                    &start,
                    0,
                    i,
                    budget(),
                    Settle::Any,
                    &mut |o, c| {
                        if o == Outcome::Arrived {
                            pieces.extend_disjoint(Region::from_cube(c.clone()));
                        }
                        false
                    },
                    &mut |_| {},
                )
                .unwrap();
            for pkt in &pkts {
                assert_eq!(
                    walked.contains(&space, pkt),
                    pieces.contains(&space, pkt),
                    "seed {seed} entry {i}: {pkt}"
                );
            }
            if !returns {
                assert_eq!(
                    walked.witness(&space),
                    pieces.witness(&space),
                    "seed {seed}"
                );
            }
            compared += 1;
        }
    }
    assert!(compared > 1000, "only {compared} entries compared");
}

/// The path `diff` takes for lists without RETURN entries and with one
/// policy (only the boxes of rules outside the common subsequence are
/// compared): boxes whose witnesses differ under the linear engine, points
/// outside every box that agree, and the same packets, with the same
/// deciding rules, as the comparison of every region.
#[test]
fn diff_of_edited_flat_lists_compares_only_changed_rules_exactly() {
    let (mut boxes, mut points) = (0, 0);
    for seed in 0..200u64 {
        let spec = RandomSpec {
            rules: 6 + (seed as usize % 40),
            user_chains: 0,
            control_flow: seed % 2 == 0,
            ..Default::default()
        };
        let mut a = random_ruleset(seed, &spec);
        if seed % 3 == 0 {
            // A catch-all at the end, as ClassBench sets have.
            let id = a.rules().map(|r| r.id).max().unwrap_or(0) + 1;
            let chain = a.select_chain(None).unwrap();
            a.tables[chain.table].chains[chain.chain]
                .rules
                .push(Rule::new(
                    id,
                    Matches::default(),
                    Action::Verdict(Verdict::Drop),
                ));
        }
        let a = a;
        let b = mutate(&a, seed);
        let (la, lb) = (list(&a), list(&b));
        if la
            .entries
            .iter()
            .chain(&lb.entries)
            .any(|e| matches!(e.kind, EntryKind::Return { .. }))
        {
            continue;
        }
        let (b_boxes, b_points) = changed_rules_path_is_exact(&a, &b, seed);
        boxes += b_boxes;
        points += b_points;
    }
    assert!(
        boxes > 300 && points > 15_000,
        "{boxes} boxes, {points} points"
    );
}

/// Lists with RETURN entries: a RETURN that skips no deciding entry (the
/// last rule of the chain a jump enters, as perturb.py's jump edit makes)
/// changes no verdict; one that skips deciding entries (here: the chain
/// goes on after it, and B's RETURN matches other packets than A's) is
/// compared like a deciding entry. Both against the linear engine and the
/// comparison of every region.
#[test]
fn diff_of_edits_with_returning_jumps_is_exact() {
    let (mut boxes, mut points, mut skipping, mut with_return) = (0, 0, 0, 0);
    for seed in 0..240u64 {
        let spec = RandomSpec {
            rules: 6 + (seed as usize % 40),
            user_chains: 0,
            control_flow: false,
            ..Default::default()
        };
        let base = random_ruleset(seed, &spec);
        let rules: Vec<Matches> = base.rules().map(|r| r.matches.clone()).collect();
        let pick = |k: u64| rules[((seed * 11 + k * 5) as usize) % rules.len()].clone();
        let verdict = |v: Verdict| Action::Verdict(v);
        let (at, other) = ((seed * 3) as usize, (seed * 7 + 1) as usize);
        let returning = [
            (pick(1), verdict(Verdict::Reject { with: None })),
            (pick(2), verdict(Verdict::Drop)),
            (Matches::default(), Action::Return),
        ];
        let (a, b) = match seed % 3 {
            // B only jumps; A is B without the jump, edited.
            0 => (mutate(&base, seed), with_jump(&base, at, &returning)),
            // Both jump, at different rules, and B is edited.
            1 => (
                with_jump(&base, other, &returning),
                mutate(&with_jump(&base, at, &returning), seed),
            ),
            // A RETURN that skips a deciding rule, matching other packets
            // in A than in B.
            _ => {
                skipping += 1;
                let chain = |ret: Matches| {
                    [
                        (pick(1), verdict(Verdict::Reject { with: None })),
                        (ret, Action::Return),
                        (pick(3), verdict(Verdict::Drop)),
                        (pick(4), verdict(Verdict::Accept)),
                    ]
                };
                (
                    with_jump(&base, at, &chain(pick(2))),
                    with_jump(&base, at, &chain(Matches::default())),
                )
            }
        };
        let lb = list(&b);
        // (An edit of B may have removed its jump.)
        if !lb
            .entries
            .iter()
            .any(|e| matches!(e.kind, EntryKind::Return { .. }))
        {
            continue;
        }
        with_return += 1;
        let (b_, p_) = changed_rules_path_is_exact(&a, &b, seed);
        (boxes, points) = (boxes + b_, points + p_);
    }
    assert!(
        boxes > 300 && points > 15_000 && skipping > 50 && with_return > 200,
        "{boxes} boxes, {points} points, {with_return} lists with RETURNs, \
         {skipping} of them skipping"
    );
}

/// An edit of any chain (user chains too) of random rulesets with jumps,
/// gotos and RETURNs in the middle of chains, as Docker's and ufw's chains
/// have: the changed-rules path, with common RETURNs matched across the
/// lists, against the linear engine and the comparison of every region.
#[test]
fn diff_of_edits_with_gotos_and_mid_chain_returns_is_exact() {
    let (mut boxes, mut points, mut compared) = (0, 0, 0);
    for seed in 0..300u64 {
        let spec = RandomSpec {
            rules: 6 + (seed as usize % 30),
            user_chains: 1 + (seed % 3) as usize,
            ipv6: seed % 4 == 0,
            control_flow: true,
            ..Default::default()
        };
        let a = random_ruleset(seed, &spec);
        // Edit one chain, the base chain or a user chain, by moving it first.
        let mut b = a.clone();
        let chains = &mut b.tables[0].chains;
        let pick = (seed as usize / 3) % chains.len();
        chains.swap(0, pick);
        let mut b = mutate(&b, seed);
        b.tables[0].chains.swap(0, pick);
        let la = list(&a);
        let skipping = |l: &DecisionList| {
            l.entries.iter().enumerate().any(|(i, e)| {
                matches!(e.kind, EntryKind::Return { resume, .. }
                    if l.entries[i + 1..(resume as usize).min(l.entries.len())]
                        .iter()
                        .any(|x| x.kind.is_terminal()))
            })
        };
        if !skipping(&la) || la.policy != list(&b).policy {
            continue;
        }
        let (b_, p_) = changed_rules_path_is_exact(&a, &b, seed);
        compared += (p_ > 0) as usize;
        (boxes, points) = (boxes + b_, points + p_);
    }
    assert!(
        boxes > 200 && points > 15_000 && compared > 100,
        "{boxes} boxes, {points} points, {compared} pairs compared"
    );
}

/// `lint`'s warnings and chain findings, against the linear engine: a
/// correlation's witness is decided by the earlier rule while the later
/// rule matches it with another verdict; no packet is decided by a rule of
/// a chain that always returns, and no packet touches a rule of a chain
/// never reached.
#[test]
fn lint_warnings_agree_with_linear() {
    let (mut correlations, mut chains) = (0, 0);
    for seed in 0..200u64 {
        let rs = random_ruleset(seed, &spec(seed));
        let options = LintOptions { correlations: 50 };
        let report = lint_with(&rs, &[list(&rs)], budget(), options).unwrap();
        let e = LinearEngine::new(&rs, rs.select_chain(None).unwrap()).unwrap();
        let rule = |id: u32| rs.rules().find(|r| r.id == id).unwrap();
        let verdict = |id: u32| match &rule(id).action {
            Action::Verdict(v) => v.clone(),
            a => panic!("seed {seed}: rule {id} does not decide: {a:?}"),
        };
        let chain_rules = |name: &str| -> Vec<u32> {
            let (table, chain) = name.split_once('/').unwrap();
            let id = rs.find_chain(table, chain).unwrap();
            rs.chain(id).rules.iter().map(|r| r.id).collect()
        };
        let pkts = packets(&rs, seed, 200);
        for f in report.findings.iter().chain(&report.warnings) {
            match f.kind {
                FindingKind::Correlation => {
                    correlations += 1;
                    let w = f.explain.witness.as_ref().expect("a witness");
                    let d = e.classify(w, &NoSets).unwrap();
                    assert_eq!(d.rule_id, f.by[0], "seed {seed}: {w}");
                    assert!(
                        rule(f.rule).matches.matches(w, &mut |_| false),
                        "seed {seed}: {w}"
                    );
                    assert_ne!(verdict(f.rule), verdict(f.by[0]), "seed {seed}");
                }
                FindingKind::ReturningChain | FindingKind::UnreachedChain => {
                    chains += 1;
                    let inside = chain_rules(f.chain.as_deref().unwrap());
                    for p in &pkts {
                        let d = e.classify(p, &NoSets).unwrap();
                        assert!(!inside.contains(&d.rule_id), "seed {seed}: {p} {f:?}");
                        if f.kind == FindingKind::UnreachedChain {
                            assert!(
                                d.nonterminal.iter().all(|id| !inside.contains(id)),
                                "seed {seed}: {p} {f:?}"
                            );
                        }
                    }
                }
                _ => {}
            }
        }
    }
    assert!(
        correlations > 50 && chains > 0,
        "{correlations} correlations, {chains} chain findings"
    );
}

/// The LOG and counter-only rules a decision passed, by id.
fn logged(rs: &Ruleset, d: &Decision) -> std::collections::BTreeSet<u32> {
    d.nonterminal
        .iter()
        .copied()
        .filter(|&id| {
            rs.rules()
                .any(|r| r.id == id && matches!(r.action, Action::Log(_) | Action::Count))
        })
        .collect()
}

/// `diff --rules`: every box's witness differs as the box says (deciding
/// rule or verdict; or one non-terminal rule matching on one side only),
/// every random packet inside a box differs the same way, and every packet
/// outside all boxes has the same deciding rule, verdict, LOG and counter
/// rules in both.
#[test]
fn diff_by_rule_agrees_with_linear() {
    let (mut boxes, mut nonterminal, mut outside) = (0, 0, 0);
    let all = NonTerminal {
        logs: true,
        counters: true,
    };
    for seed in 0..200u64 {
        let a = random_ruleset(seed, &spec(seed));
        let b = mutate(&a, seed);
        let (la, lb) = (list(&a), list(&b));
        let report = diff_rules(&la, &lb, budget(), all).unwrap();
        if !report.unproven.is_empty() {
            continue;
        }
        let ea = LinearEngine::new(&a, a.select_chain(None).unwrap()).unwrap();
        let eb = LinearEngine::new(&b, b.select_chain(None).unwrap()).unwrap();
        let space =
            parapet_model::Space::of(la.entries.iter().chain(&lb.entries).map(|e| &e.matches))
                .unwrap();
        let holds = |d: &Difference, pkt: &Packet| {
            let (da, db) = (
                ea.classify(pkt, &NoSets).unwrap(),
                eb.classify(pkt, &NoSets).unwrap(),
            );
            match &d.nonterminal {
                None => (da.rule_id, &da.verdict) != (db.rule_id, &db.verdict),
                Some(n) => {
                    let (mine, other) = if n.in_a {
                        (logged(&a, &da), logged(&b, &db))
                    } else {
                        (logged(&b, &db), logged(&a, &da))
                    };
                    mine.contains(&n.rule) && !other.contains(&n.rule)
                }
            }
        };
        for d in &report.differences {
            assert!(holds(d, &d.witness), "seed {seed}: {d:?}");
            boxes += 1;
            nonterminal += d.nonterminal.is_some() as usize;
        }
        for pkt in packets(&a, seed, 150) {
            let mut inside = false;
            for d in report
                .differences
                .iter()
                .filter(|d| space.contains(&d.cube, &pkt))
            {
                assert!(holds(d, &pkt), "seed {seed}: {pkt} in {d:?}");
                inside = true;
            }
            if !inside {
                let (da, db) = (
                    ea.classify(&pkt, &NoSets).unwrap(),
                    eb.classify(&pkt, &NoSets).unwrap(),
                );
                assert_eq!(
                    (da.rule_id, &da.verdict),
                    (db.rule_id, &db.verdict),
                    "seed {seed}: {pkt}"
                );
                assert_eq!(logged(&a, &da), logged(&b, &db), "seed {seed}: {pkt}");
                outside += 1;
            }
        }
    }
    assert!(
        boxes > 200 && nonterminal > 10 && outside > 10_000,
        "{boxes} boxes ({nonterminal} non-terminal), {outside} packets outside"
    );
}
