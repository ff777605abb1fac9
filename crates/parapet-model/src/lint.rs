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
//! - **empty-match**: the rule's conditions contradict each other (a port
//!   range that excludes itself, two address conditions with nothing in
//!   common): no packet can match it, wherever it stands.
//! - **unreached-chain** (`chain_findings.rs`): no packet reaches any jump
//!   or goto into a user chain (or none exists): every rule of it is dead.
//!
//! Warnings do not change the exit code, because they flag rules that may be
//! meant as they are:
//! - **returning-chain** (`chain_findings.rs`): every packet entering a
//!   chain comes back out of it undecided (it only logs or counts, or its
//!   deciding rules are never reached);
//! - **correlation** (`correlation.rs`): a later rule overlaps an earlier
//!   one with another verdict only partly, ranked by the packets they share.

use crate::depth_first::Outcome;
use crate::finding::{fixed_memberships, Explain, Finding, FindingKind};
use crate::flatten::{DecisionList, EntryKind};
use crate::packet::Packet;
use crate::reach::{Settle, Stop, Walker};
use crate::region::{Budget, Cube, OverBudget, Region, Space};
use crate::rule::Ruleset;
use std::collections::{BTreeMap, HashMap};

/// What to look for beyond unreachable and redundant rules.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct LintOptions {
    /// Most correlation warnings reported (the largest overlaps first); 0
    /// looks for none.
    pub correlations: usize,
}

impl Default for LintOptions {
    fn default() -> Self {
        LintOptions { correlations: 10 }
    }
}

/// The result of linting.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LintReport {
    /// Findings, by rule id.
    pub findings: Vec<Finding>,
    /// Warnings (chains that always return, correlations), by kind, then
    /// rule id; correlations by the packets they cover, most first.
    pub warnings: Vec<Finding>,
    /// The fields of the analysis space: the dimensions of explanation boxes.
    pub dims: Vec<crate::field::Field>,
    /// False when the correlation search stopped at its bound on rule
    /// pairs or at the deadline: larger correlations than those reported
    /// may exist.
    pub correlations_complete: bool,
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
///
/// A guarded rule (a stateful jump, or matches after the stateful one:
/// `flatten::emit_chain`) is a conditional RETURN into the rule's entries
/// and an unconditional one past them: both become counter-only, and so
/// does what decides inside (a decision, or a RETURN past the guard), so
/// lint walks the path where the condition refuses and still sees the
/// rule's entries.
fn limits_let_packets_on(list: &DecisionList) -> DecisionList {
    let mut list = list.clone();
    let n = list.entries.len();
    for i in 0..n {
        let guard = match (&list.entries[i].kind, list.entries.get(i + 1)) {
            (EntryKind::Return { resume, .. }, Some(next))
                if list.entries[i].is_stateful() && *resume as usize == i + 2 =>
            {
                match next.kind {
                    EntryKind::Return { resume: past, .. } if !next.is_stateful() => {
                        Some(past as usize)
                    }
                    _ => None,
                }
            }
            _ => None,
        };
        if let Some(past) = guard {
            for e in &mut list.entries[i + 1..past.min(n)] {
                let decides = match e.kind {
                    EntryKind::Decide(_) => true,
                    EntryKind::Return { resume, .. } => resume as usize > past,
                    _ => false,
                };
                if decides {
                    e.kind = EntryKind::Count;
                }
            }
            list.entries[i + 1].kind = EntryKind::Count;
        }
        if list.entries[i].is_conditional() {
            list.entries[i].kind = EntryKind::Count;
        }
    }
    list
}

/// Lints `ruleset`, whose base chains flattened (unpruned) to `lists`, with
/// the default [`LintOptions`].
pub fn lint(
    ruleset: &Ruleset,
    lists: &[DecisionList],
    budget: Budget,
) -> Result<LintReport, String> {
    lint_with(ruleset, lists, budget, LintOptions::default())
}

/// As [`lint`], with `options`.
pub fn lint_with(
    ruleset: &Ruleset,
    lists: &[DecisionList],
    budget: Budget,
    options: LintOptions,
) -> Result<LintReport, String> {
    // A rule with a limit decides only while its bucket lasts: for what can
    // reach the rules after it, it lets every packet on (a counter-only
    // entry), so lint never calls a rule behind it unreachable.
    let lists: Vec<DecisionList> = lists.iter().map(limits_let_packets_on).collect();
    let lists = &lists[..];
    // Set memberships are free dimensions: findings hold whatever the sets
    // hold (see `Space::with_sets`).
    let space = Space::with_sets(
        lists
            .iter()
            .flat_map(|l| l.entries.iter().map(|e| &e.matches)),
    );
    let mut report = LintReport {
        dims: space.dims().to_vec(),
        correlations_complete: true,
        ..LintReport::default()
    };
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
                        Settle::Arrival,
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
    // Per rule: reached (true), never reached (false), not proven (absent).
    let mut reached: HashMap<u32, bool> = HashMap::new();
    for rule in ruleset.rules() {
        let Some(at) = entries.get(&rule.id) else {
            unreachable.insert(rule.id);
            reached.insert(rule.id, false);
            if rule.matches.is_unsatisfiable() {
                let mut f = Finding::new(FindingKind::EmptyMatch, rule.id, Vec::new());
                f.note = Some("its conditions contradict each other: no packet matches it");
                f.explain.empty_fields = rule
                    .matches
                    .iter()
                    .filter(|(_, values)| values.is_empty())
                    .map(|(field, _)| *field)
                    .collect();
                report.findings.push(f);
            } else {
                let mut f = Finding::new(FindingKind::Unreachable, rule.id, Vec::new());
                f.note = Some("no jump reaches its chain with a packet it could match");
                report.findings.push(f);
            }
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
            Ok(true) => {
                reached.insert(rule.id, true);
            }
            Ok(false) => {
                unreachable.insert(rule.id);
                reached.insert(rule.id, false);
                let by = shadowing_rules(&walkers, &reaches, at);
                let mut f = Finding::new(FindingKind::Unreachable, rule.id, by);
                f.explain = unreachable_explain(&walkers, &space, at);
                report.findings.push(f);
            }
            Err(OverBudget) => report.unproven.push(rule.id),
        }
    }
    let (chain_findings, chain_warnings) =
        crate::chain_findings::chain_findings(ruleset, &|id| reached.get(&id).copied());
    report.findings.extend(chain_findings);
    report.warnings.extend(chain_warnings);
    if options.correlations > 0 {
        let (found, complete) = crate::correlation::correlations(
            &walkers,
            &space,
            &unreachable,
            options.correlations,
            budget,
        );
        report.warnings.extend(found);
        report.correlations_complete = complete;
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
        // A masked comparison decides part of its box, which the regions
        // cannot describe: a rule before one is not called redundant (the
        // masked rule could take some of its packets once it is gone).
        let last_masked = list
            .entries
            .iter()
            .rposition(|e| e.matches.has_masked() || e.matches.has_payload());
        for i in (0..list.entries.len()).rev() {
            let e = &list.entries[i];
            let EntryKind::Decide(verdict) = &e.kind else {
                continue;
            };
            if last_masked.is_some_and(|m| m > i) {
                continue;
            }
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
                        Settle::Arrival,
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
                let mut f = Finding::new(
                    FindingKind::Redundant,
                    e.rule_id,
                    vec![w.decide_point(witness, i + 1)],
                );
                f.witness = Some(witness.clone());
                f.explain = Explain {
                    boxes: w.universe_within(w.cube(i)).cubes().to_vec(),
                    points_log2: Some(space.points_log2(w.cube(i))),
                    witness: Some(witness.clone()),
                    empty_fields: Vec::new(),
                    list: Some(l),
                    witness_sets: fixed_memberships(&space, w.cube(i)),
                };
                report.findings.push(f);
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

/// An unreachable rule's explanation: the boxes of its entries and a
/// packet of them (which an earlier rule decides, or a RETURN skips past).
fn unreachable_explain(walkers: &[Walker], space: &Space, at: &[(usize, usize)]) -> Explain {
    let boxes: Vec<Cube> = at
        .iter()
        .flat_map(|&(l, i)| {
            walkers[l]
                .universe_within(walkers[l].cube(i))
                .cubes()
                .to_vec()
        })
        .collect();
    let found = boxes
        .iter()
        .find_map(|c| space.witness(c).map(|w| (w, fixed_memberships(space, c))));
    let points_log2 = boxes.first().map(|c| space.points_log2(c));
    let (witness, witness_sets) = match found {
        Some((w, sets)) => (Some(w), sets),
        None => (None, Vec::new()),
    };
    Explain {
        boxes,
        points_log2,
        witness,
        empty_fields: Vec::new(),
        list: at.first().map(|a| a.0),
        witness_sets,
    }
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
