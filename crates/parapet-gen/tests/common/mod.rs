//! What the analysis tests share: random packets the analysis universe
//! can write, the decision list of a ruleset, small edits, and the check
//! that `diff`'s changed-rules path is exact (against the linear engine
//! and against the comparison of every region).
// Each test binary uses a part of it.
#![allow(dead_code)]

use parapet_gen::*;
use parapet_model::*;

pub fn budget() -> Budget {
    Budget::default()
}

/// Random packets whose interface names `--packet` can write (the
/// analysis universe).
pub fn packets(rs: &Ruleset, seed: u64, n: usize) -> Vec<Packet> {
    let writable = |v: u128| {
        let b = v.to_be_bytes();
        let len = b.iter().position(|&c| c == 0).unwrap_or(16);
        len < 16
            && b[..len].iter().all(|c| (0x21..=0x7e).contains(c))
            && b[len..].iter().all(|&c| c == 0)
    };
    packets_for(rs, seed, n)
        .into_iter()
        .map(|mut p| {
            if !writable(p.iif.0) {
                p.iif = IfName(0);
            }
            if !writable(p.oif.0) {
                p.oif = IfName(0);
            }
            p
        })
        .collect()
}

pub fn list(rs: &Ruleset) -> DecisionList {
    flatten_unpruned(rs, rs.select_chain(None).unwrap(), DEFAULT_MAX_ENTRIES).unwrap()
}

/// B: A with a few small edits (swap neighbours, flip a verdict, drop a rule).
pub fn mutate(rs: &Ruleset, seed: u64) -> Ruleset {
    let mut b = rs.clone();
    let rules = &mut b.tables[0].chains[0].rules;
    let n = rules.len();
    for k in 0..1 + seed % 3 {
        let i = ((seed * 7 + k * 13) as usize) % n.max(1);
        match (seed + k) % 3 {
            0 if i + 1 < rules.len() => rules.swap(i, i + 1),
            1 if i < rules.len() => {
                if let Action::Verdict(v) = &mut rules[i].action {
                    *v = if *v == Verdict::Accept {
                        Verdict::Drop
                    } else {
                        Verdict::Accept
                    };
                }
            }
            _ if i < rules.len() && rules.len() > 1 => {
                rules.remove(i);
            }
            _ => {}
        }
    }
    b
}

/// Which points of `pkts` lie in some box of the report, with the two
/// deciding rule ids there.
pub fn located(report: &DiffReport, space: &Space, pkts: &[Packet]) -> Vec<Option<(u32, u32)>> {
    pkts.iter()
        .map(|p| {
            let hits: Vec<&Difference> = report
                .differences
                .iter()
                .filter(|d| space.contains(&d.cube, p))
                .collect();
            assert!(hits.len() <= 1, "{p} lies in {} boxes", hits.len());
            hits.first().map(|d| (d.a.0, d.b.0))
        })
        .collect()
}

/// A's rules at `at` jump to a user chain `PERTURB` before deciding, as
/// perturb.py's jump edit does: the jump rule (rule `at`'s matches) is
/// inserted before rule `at`. The chain holds `rules`.
pub fn with_jump(rs: &Ruleset, at: usize, rules: &[(Matches, Action)]) -> Ruleset {
    let mut out = rs.clone();
    let c = out.select_chain(None).unwrap();
    let mut id = out.rules().map(|r| r.id).max().unwrap_or(0);
    let mut next = || {
        id += 1;
        id
    };
    let chain: Vec<Rule> = rules
        .iter()
        .map(|(m, a)| Rule::new(next(), m.clone(), a.clone()))
        .collect();
    let base = &mut out.tables[c.table].chains[c.chain].rules;
    let at = at % base.len();
    let jump = Rule::new(
        next(),
        base[at].matches.clone(),
        Action::Jump("PERTURB".into()),
    );
    base.insert(at, jump);
    let table = &mut out.tables[c.table].chains;
    if let Some(p) = table.iter_mut().find(|ch| ch.name == "PERTURB") {
        p.rules = chain;
    } else {
        table.push(Chain {
            name: "PERTURB".into(),
            base: None,
            rules: chain,
        });
    }
    out
}

/// `diff` (the changed-rules path, lists of one policy) against the linear
/// engine and the comparison of every region: every box's witness gets
/// different verdicts and the box's deciding rules; random points and
/// every witness lie in a box exactly when their verdicts differ, in the
/// same box (same deciding rules) as the comparison of every region
/// finds. Returns the boxes and points checked (none when either
/// comparison hit the budget).
pub fn changed_rules_path_is_exact(a: &Ruleset, b: &Ruleset, seed: u64) -> (usize, usize) {
    let (la, lb) = (list(a), list(b));
    let fast = diff(&la, &lb, budget()).unwrap();
    let full = diff_every_region(&la, &lb, budget()).unwrap();
    if !fast.unproven.is_empty() || !full.unproven.is_empty() {
        return (0, 0);
    }
    let ea = LinearEngine::new(a, a.select_chain(None).unwrap()).unwrap();
    let eb = LinearEngine::new(b, b.select_chain(None).unwrap()).unwrap();
    let space = Space::of(la.entries.iter().chain(&lb.entries).map(|e| &e.matches)).unwrap();
    let (mut boxes, mut points) = (0, 0);
    for d in &fast.differences {
        let (da, db) = (
            ea.classify(&d.witness, &NoSets).unwrap(),
            eb.classify(&d.witness, &NoSets).unwrap(),
        );
        assert_ne!(da.verdict, db.verdict, "seed {seed}: {}", d.witness);
        assert_eq!((da.rule_id, db.rule_id), (d.a.0, d.b.0), "seed {seed}");
        boxes += 1;
    }
    // Random packets, and every witness of either report.
    let mut pkts = packets(a, seed, 150);
    pkts.extend(full.differences.iter().map(|d| d.witness.clone()));
    pkts.extend(fast.differences.iter().map(|d| d.witness.clone()));
    let (in_fast, in_full) = (located(&fast, &space, &pkts), located(&full, &space, &pkts));
    for (k, pkt) in pkts.iter().enumerate() {
        let (da, db) = (
            ea.classify(pkt, &NoSets).unwrap(),
            eb.classify(pkt, &NoSets).unwrap(),
        );
        assert_eq!(
            da.verdict != db.verdict,
            in_fast[k].is_some(),
            "seed {seed}: {pkt}"
        );
        assert_eq!(in_fast[k], in_full[k], "seed {seed}: {pkt}");
        points += 1;
    }
    (boxes, points)
}
