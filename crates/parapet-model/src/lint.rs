//! `parapet lint`: rules that can never decide a packet, found exactly with
//! first-match regions.
//!
//! - **unreachable**: no packet reaches the rule and matches it — every
//!   entry it flattened to has an empty first-match region (shadowed by one
//!   earlier rule or by several together, through jumps, gotos and
//!   RETURNs), or it has no entry at all (its match is empty, or no jump
//!   reaches its chain with a packet it could match).
//! - **redundant**: the rule decides some packets, but removing it changes
//!   no packet's verdict: every packet it decides gets the same verdict
//!   further down. Checked from the last rule to the first, each against
//!   the list without the redundant rules found so far, so all of them can
//!   be removed together.

use crate::depth_first::Outcome;
use crate::flatten::{DecisionList, EntryKind};
use crate::packet::Packet;
use crate::reach::{Settle, Stop, Walker};
use crate::region::{Budget, Cube, OverBudget, Region, Space};
use crate::rule::Ruleset;
use std::collections::BTreeMap;

/// What is wrong with a rule.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum FindingKind {
    /// No packet reaches it.
    Unreachable,
    /// Removing it changes no packet's verdict.
    Redundant,
}

impl FindingKind {
    /// The name used in output (`unreachable`, `redundant`).
    pub fn name(self) -> &'static str {
        match self {
            FindingKind::Unreachable => "unreachable",
            FindingKind::Redundant => "redundant",
        }
    }
}

/// One finding about one rule.
#[derive(Clone, Debug, PartialEq)]
pub struct Finding {
    /// What kind.
    pub kind: FindingKind,
    /// The rule's id.
    pub rule: u32,
    /// Unreachable: the earlier rules that take or skip every packet it
    /// matches (one rule when one suffices). Redundant: the rule that
    /// decides the witness once it is gone (0: the policy).
    pub by: Vec<u32>,
    /// Redundant: a packet the rule decides, which keeps its verdict
    /// without it.
    pub witness: Option<Packet>,
    /// Unreachable without any entry: why (`empty match`, `chain never
    /// reached`).
    pub note: Option<&'static str>,
}

/// The result of linting.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LintReport {
    /// Findings, by rule id.
    pub findings: Vec<Finding>,
    /// Rules whose analysis hit the budget: nothing is claimed about them.
    pub unproven: Vec<u32>,
}

/// What the first pass learns about one entry.
struct Reach {
    /// A packet reaching it, if any.
    witness: Option<Packet>,
    /// When none does: the entries that took or skipped part of its match.
    touched: Vec<usize>,
}

/// `list` with every entry that has a limit made counter-only.
fn limits_let_packets_on(list: &DecisionList) -> DecisionList {
    let mut list = list.clone();
    for e in &mut list.entries {
        if e.is_stateful() {
            e.kind = EntryKind::Count;
        }
    }
    list
}

/// Lints `ruleset`, whose base chains flattened (unpruned) to `lists`.
pub fn lint(
    ruleset: &Ruleset,
    lists: &[DecisionList],
    budget: Budget,
) -> Result<LintReport, String> {
    // A rule with a limit decides only while its bucket lasts: for what can
    // reach the rules after it, it lets every packet on (a counter-only
    // entry), so lint never calls a rule behind it unreachable.
    let lists: Vec<DecisionList> = lists.iter().map(limits_let_packets_on).collect();
    let lists = &lists[..];
    let space = Space::of(
        lists
            .iter()
            .flat_map(|l| l.entries.iter().map(|e| &e.matches)),
    )?;
    let mut report = LintReport::default();
    // rule id -> its entries, as (list, index)
    let mut entries: BTreeMap<u32, Vec<(usize, usize)>> = BTreeMap::new();
    for (l, list) in lists.iter().enumerate() {
        for (i, e) in list.entries.iter().enumerate() {
            entries.entry(e.rule_id).or_default().push((l, i));
        }
    }
    let mut walkers: Vec<Walker> = lists.iter().map(|l| Walker::new(l, &space)).collect();
    // Whether each entry is reached (a depth-first search stops at the
    // first packet that is), and who shadows it when it is not.
    let reaches: Vec<Vec<Result<Reach, OverBudget>>> = walkers
        .iter()
        .map(|w| {
            (0..w.list.entries.len())
                .map(|i| {
                    // Past the deadline nothing more is proven, probes
                    // included (a search checks it itself).
                    if budget
                        .deadline
                        .is_some_and(|t| std::time::Instant::now() > t)
                    {
                        return Err(OverBudget);
                    }
                    if let Some(witness) = probe(w, &space, i, |_| true) {
                        return Ok(Reach {
                            witness: Some(witness),
                            touched: Vec::new(),
                        });
                    }
                    let start = w.universe_within(w.cube(i));
                    let mut witness = None;
                    let mut touched = Vec::new();
                    w.search(
                        &start,
                        0,
                        i,
                        budget,
                        Settle::Any,
                        &mut |outcome, cube| {
                            witness = (outcome == Outcome::Arrived)
                                .then(|| space.witness(cube))
                                .flatten();
                            witness.is_some()
                        },
                        &mut |j| touched.push(j),
                    )?;
                    touched.sort_unstable();
                    touched.dedup();
                    if witness.is_some() {
                        touched.clear();
                    }
                    Ok(Reach { witness, touched })
                })
                .collect()
        })
        .collect();
    let reachable = |l: usize, i: usize| -> Result<bool, OverBudget> {
        let r = reaches[l][i].as_ref().map_err(|e| *e)?;
        Ok(r.witness.is_some())
    };
    let mut unreachable = std::collections::BTreeSet::new();
    for rule in ruleset.rules() {
        let Some(at) = entries.get(&rule.id) else {
            let note = if rule.matches.is_unsatisfiable() {
                "its match is empty"
            } else {
                "no jump reaches its chain with a packet it could match"
            };
            unreachable.insert(rule.id);
            report.findings.push(Finding {
                kind: FindingKind::Unreachable,
                rule: rule.id,
                by: Vec::new(),
                witness: None,
                note: Some(note),
            });
            continue;
        };
        let mut any = Ok(false);
        for &(l, i) in at {
            match reachable(l, i) {
                Ok(true) => {
                    any = Ok(true);
                    break;
                }
                Ok(false) => {}
                Err(e) => any = Err(e),
            }
        }
        match any {
            Ok(true) => {}
            Ok(false) => {
                unreachable.insert(rule.id);
                report.findings.push(Finding {
                    kind: FindingKind::Unreachable,
                    rule: rule.id,
                    by: shadowing_rules(&walkers, &reaches, at),
                    witness: None,
                    note: None,
                });
            }
            Err(OverBudget) => report.unproven.push(rule.id),
        }
    }
    // Redundancy, last rule first, for rules that flattened to one
    // deciding entry. Unreachable rules are gone first: a rule is not
    // redundant because an unreachable copy of it would take over.
    for (&id, at) in &entries {
        if unreachable.contains(&id) {
            for &(l, i) in at {
                walkers[l].remove(i);
            }
        }
    }
    for (l, walker) in walkers.iter_mut().enumerate() {
        let list = walker.list;
        for i in (0..list.entries.len()).rev() {
            let e = &list.entries[i];
            let EntryKind::Decide(verdict) = &e.kind else {
                continue;
            };
            if entries[&e.rule_id].len() != 1 || unreachable.contains(&e.rule_id) {
                continue;
            }
            let Ok(Reach {
                witness: Some(witness),
                ..
            }) = &reaches[l][i]
            else {
                continue;
            };
            if budget
                .deadline
                .is_some_and(|t| std::time::Instant::now() > t)
            {
                report.unproven.push(e.rule_id);
                continue;
            }
            let w = &*walker;
            let n = w.list.entries.len();
            let start = w.universe_within(w.cube(i));
            // A packet the rule decides that gets another verdict without
            // it: first among all of its match standing after it (when none
            // does, the rule is redundant whatever reaches it), then, only
            // if one does, among the packets that really reach it.
            let differs = &mut |outcome: Outcome, cube: &Cube| {
                let stop = match outcome {
                    Outcome::Decided(stop) => stop,
                    Outcome::Arrived => Stop::Policy,
                };
                w.verdict(stop) != verdict && space.witness(cube).is_some()
            };
            // The quick search also tries the witness of the first few
            // pieces that get another verdict: one that reaches the rule
            // proves it is needed with one point lookup, where the exact
            // search below walks every packet before the rule.
            let (mut differing, mut needed) = (0usize, false);
            let quick = w.search(
                &start,
                i + 1,
                n,
                budget,
                Settle::SameAs(verdict),
                &mut |outcome, cube| {
                    let stop = match outcome {
                        Outcome::Decided(stop) => stop,
                        Outcome::Arrived => Stop::Policy,
                    };
                    if w.verdict(stop) == verdict {
                        return false;
                    }
                    let Some(pkt) = space.witness(cube) else {
                        return false;
                    };
                    differing += 1;
                    needed = w.arrives_at(&pkt, i);
                    needed || differing >= DIFFERING_TRIES
                },
                &mut |_| {},
            );
            if needed {
                continue;
            }
            let quick = match quick {
                Ok(false) if differing > 0 => Ok(true),
                q => q,
            };
            // Then corners of the rule's box, before the exact search.
            if quick != Ok(false)
                && probe(w, &space, i, |pkt| {
                    w.verdict(w.stop_from(pkt, i + 1)) != verdict
                })
                .is_some()
            {
                continue;
            }
            let found = match quick {
                Ok(false) => Ok(false),
                _ => {
                    let mut inner = Ok(false);
                    w.search(
                        &start,
                        0,
                        i,
                        budget,
                        Settle::Any,
                        &mut |outcome, cube| {
                            if outcome != Outcome::Arrived {
                                return false;
                            }
                            inner = w.search(
                                &Region::from_cube(cube.clone()),
                                i + 1,
                                n,
                                budget,
                                Settle::SameAs(verdict),
                                differs,
                                &mut |_| {},
                            );
                            inner != Ok(false)
                        },
                        &mut |_| {},
                    )
                    .and(inner)
                }
            };
            let same = match found {
                Ok(found) => !found,
                Err(OverBudget) => {
                    report.unproven.push(e.rule_id);
                    continue;
                }
            };
            if same {
                report.findings.push(Finding {
                    kind: FindingKind::Redundant,
                    rule: e.rule_id,
                    by: vec![w.decide_point(witness, i + 1)],
                    witness: Some(witness.clone()),
                    note: None,
                });
                walker.remove(i);
            }
        }
    }
    report.findings.sort_by_key(|f| f.rule);
    report.unproven.sort_unstable();
    report.unproven.dedup();
    Ok(report)
}

/// How many pieces with another verdict the quick redundancy search tries
/// a witness of before it leaves the question to the exact search.
const DIFFERING_TRIES: usize = 16;

/// A corner of entry `i`'s box (each side at its low or its high end) that
/// reaches the entry and passes `also`, if one of the first few does: most
/// reachable rules have one, and a point costs one index lookup where a
/// search of the rule's box costs a subtraction per piece. Not finding one
/// proves nothing; the search then decides.
fn probe(w: &Walker, space: &Space, i: usize, also: impl Fn(&Packet) -> bool) -> Option<Packet> {
    const CORNERS: usize = 64;
    let cube = w.cube(i);
    let sides = cube.sides();
    let ends: Vec<[u128; 2]> = w
        .universe_within(cube)
        .cubes()
        .first()?
        .hull()
        .map(|(lo, hi)| [lo, hi])
        .collect();
    (0..CORNERS.min(1 << sides.len().min(16))).find_map(|bits| {
        let corner: Vec<(u128, u128)> = ends
            .iter()
            .enumerate()
            .map(|(d, e)| {
                let v = e[(bits >> d) & 1];
                (v, v)
            })
            .collect();
        let pkt = space.witness(&Cube::from_hull(&corner))?;
        (space.contains(cube, &pkt) && w.arrives_at(&pkt, i) && also(&pkt)).then_some(pkt)
    })
}

/// The rules that took or skipped the packets of an unreachable rule's
/// entries; one rule when one earlier deciding rule covers its match and
/// no RETURN comes before it.
fn shadowing_rules(
    walkers: &[Walker],
    reaches: &[Vec<Result<Reach, OverBudget>>],
    at: &[(usize, usize)],
) -> Vec<u32> {
    let mut by = Vec::new();
    for &(l, i) in at {
        let w = &walkers[l];
        let Ok(Reach { touched, .. }) = &reaches[l][i] else {
            continue;
        };
        let no_return_before = !w.list.entries[..i]
            .iter()
            .any(|e| matches!(e.kind, EntryKind::Return { .. }));
        let single = touched.iter().find(|&&j| {
            no_return_before
                && w.list.entries[j].kind.is_terminal()
                && w.cube(i).is_subset(w.cube(j))
        });
        match single {
            Some(&j) if at.len() == 1 => return vec![w.list.entries[j].rule_id],
            _ => by.extend(touched.iter().map(|&j| w.list.entries[j].rule_id)),
        }
    }
    by.sort_unstable();
    by.dedup();
    by
}
