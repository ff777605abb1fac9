//! `parapet diff --rules`: the packets whose deciding rule (not only its
//! verdict) differs between two lists, and the packets a non-terminal
//! rule (LOG, or a counter-only rule) matches in one list and not in the
//! other, by rule id (rule ids are positions in the file: the same rule in
//! two rulesets of one shape has the same id).
//!
//! A LOG entry's packets are those that arrive at it and match it: a depth
//! first search of its box down the entries before it. Each such piece of
//! A is checked against B's entries of the same rule id and kind: the part
//! that arrives at one of them and matches it is logged by B too; what is
//! left is logged by A only. Then the same from B to A. Exact, like the
//! rest of `diff`; a piece whose search passes the budget marks the rule
//! unproven.

use crate::depth_first::Outcome;
use crate::diff::{diff_by_rule, DiffReport, Difference, NonTerminalDiff, Unproven};
use crate::flatten::{DecisionList, EntryKind};
use crate::reach::{Settle, Walker};
use crate::region::{Budget, Cube, OverBudget, Region, Space};

/// Which non-terminal rules `diff --rules` compares.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct NonTerminal {
    /// LOG rules (`--ignore logs` leaves them out).
    pub logs: bool,
    /// Counter-only rules: no target (`--ignore counters` leaves them out).
    pub counters: bool,
}

fn kind_of(kind: &EntryKind, which: NonTerminal) -> Option<&'static str> {
    match kind {
        EntryKind::Log if which.logs => Some("log"),
        EntryKind::Count if which.counters => Some("counter"),
        _ => None,
    }
}

/// The packets of `start` (inside entry `k`'s box) that arrive at entry `k`.
fn arriving(w: &Walker, start: &Region, k: usize, budget: Budget) -> Result<Region, OverBudget> {
    let mut out = Region::empty();
    w.search(
        start,
        0,
        k,
        budget,
        Settle::Arrival,
        &mut |outcome, cube| {
            if outcome == Outcome::Arrived {
                out.extend_disjoint(Region::from_cube(cube.clone()));
            }
            false
        },
        &mut |_| {},
    )?;
    Ok(out)
}

/// `diff --rules`: the boxes whose deciding rule or verdict differs, then
/// those a non-terminal rule of `which` matches in one list only.
pub fn diff_rules(
    a: &DecisionList,
    b: &DecisionList,
    budget: Budget,
    which: NonTerminal,
) -> Result<DiffReport, String> {
    let (space, mut report) = diff_by_rule(a, b, budget)?;
    let (wa, wb) = (Walker::new(a, &space), Walker::new(b, &space));
    nonterminal_differences(&space, &wa, &wb, budget, which, &mut report);
    Ok(report)
}

/// Appends to `report` every box a compared non-terminal rule matches in
/// one of the lists only.
fn nonterminal_differences(
    space: &Space,
    wa: &Walker,
    wb: &Walker,
    budget: Budget,
    which: NonTerminal,
    report: &mut DiffReport,
) {
    for (x, y, in_a) in [(wa, wb, true), (wb, wa, false)] {
        for (k, e) in x.list.entries.iter().enumerate() {
            let Some(kind) = kind_of(&e.kind, which) else {
                continue;
            };
            let same: Vec<usize> = y
                .list
                .entries
                .iter()
                .enumerate()
                .filter(|(_, f)| f.rule_id == e.rule_id && kind_of(&f.kind, which) == Some(kind))
                .map(|(j, _)| j)
                .collect();
            let mut found = Vec::new();
            let mut compare = || -> Result<(), OverBudget> {
                let mine = arriving(x, &x.universe_within(x.cube(k)), k, budget)?;
                for piece in mine.cubes() {
                    let mut only = Region::from_cube(piece.clone());
                    for &j in &same {
                        let inside = only.intersect(y.cube(j));
                        for c in arriving(y, &inside, j, budget)?.cubes() {
                            only = only.subtract(c, budget)?;
                        }
                    }
                    found.extend(only.cubes().iter().cloned());
                }
                Ok(())
            };
            if compare().is_err() {
                report.unproven.push(if in_a {
                    Unproven::A(e.rule_id)
                } else {
                    Unproven::B(e.rule_id)
                });
                continue;
            }
            for cube in found {
                push(space, wa, wb, cube, e.rule_id, kind, in_a, report);
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn push(
    space: &Space,
    wa: &Walker,
    wb: &Walker,
    cube: Cube,
    rule: u32,
    kind: &'static str,
    in_a: bool,
    report: &mut DiffReport,
) {
    let Some(witness) = space.witness(&cube) else {
        return;
    };
    let (sa, sb) = (wa.stop_from(&witness, 0), wb.stop_from(&witness, 0));
    report.differences.push(Difference {
        points_log2: space.points_log2(&cube),
        cube,
        a: (wa.rule_id(sa), wa.verdict(sa).clone()),
        b: (wb.rule_id(sb), wb.verdict(sb).clone()),
        witness,
        nonterminal: Some(NonTerminalDiff { rule, kind, in_a }),
    });
}
