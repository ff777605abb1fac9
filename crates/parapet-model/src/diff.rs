//! `parapet diff`: the exact set of packets two decision lists give
//! different verdicts, as disjoint cubes with a witness packet each.
//!
//! The packets are partitioned by who decides them: for every deciding
//! entry of A, its first-match region is walked down B; for every deciding
//! entry of B, its region is walked down A to find the part A's policy
//! decides; and, when the policies differ, what neither list decides. Each
//! piece whose two verdicts differ is a difference. The regions are
//! followed depth first ([`Walker::search`]), piece by piece, so no working
//! region grows with the number of rules a wide one overlaps.

use crate::depth_first::Outcome;
use crate::flatten::{DecisionList, EntryKind};
use crate::packet::Packet;
use crate::reach::{Settle, Stop, Walker};
use crate::region::{Budget, Cube, OverBudget, Region, Space};
use crate::rule::Verdict;

/// One box of packets the two lists treat differently.
#[derive(Clone, Debug, PartialEq)]
pub struct Difference {
    /// The box.
    pub cube: Cube,
    /// A packet of the box.
    pub witness: Packet,
    /// log2 of the number of points of the box.
    pub points_log2: f64,
    /// A's deciding rule (0: the policy) and verdict.
    pub a: (u32, Verdict),
    /// B's deciding rule (0: the policy) and verdict.
    pub b: (u32, Verdict),
}

/// The result of a comparison.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DiffReport {
    /// Every box found, in A's order.
    pub differences: Vec<Difference>,
    /// Rule ids (A's, then B's with a `b:` marker in `describe`) whose
    /// regions hit the budget: packets there are not compared.
    pub unproven: Vec<Unproven>,
}

/// A part of the comparison that hit the budget.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unproven {
    /// The packets A's rule decides.
    A(u32),
    /// The packets B's rule decides and A's policy.
    B(u32),
    /// The packets both policies decide.
    Policies,
}

impl DiffReport {
    /// True when every packet was compared and none differs.
    pub fn equivalent(&self) -> bool {
        self.differences.is_empty() && self.unproven.is_empty()
    }
}

/// The analysis space of both lists, or why they cannot be analysed.
pub fn space_of(lists: &[&DecisionList]) -> Result<Space, String> {
    Space::of(
        lists
            .iter()
            .flat_map(|l| l.entries.iter().map(|e| &e.matches)),
    )
}

/// Compares two decision lists packet by packet, exactly, within `budget`
/// (per working region).
pub fn diff(a: &DecisionList, b: &DecisionList, budget: Budget) -> Result<DiffReport, String> {
    let space = space_of(&[a, b])?;
    let (wa, wb) = (Walker::new(a, &space), Walker::new(b, &space));
    let mut report = DiffReport::default();
    let emit = |report: &mut DiffReport, region: Region, sa: (u32, &Verdict), sb| {
        let (sb_id, sb_verdict): (u32, &Verdict) = sb;
        if sa.1 == sb_verdict {
            return;
        }
        for cube in region.cubes() {
            if let Some(witness) = space.witness(cube) {
                report.differences.push(Difference {
                    cube: cube.clone(),
                    witness,
                    points_log2: space.points_log2(cube),
                    a: (sa.0, sa.1.clone()),
                    b: (sb_id, sb_verdict.clone()),
                });
            }
        }
    };
    // Packets A's entries decide, followed down B.
    for (i, e) in a.entries.iter().enumerate() {
        let EntryKind::Decide(va) = &e.kind else {
            continue;
        };
        let mut pieces: Vec<(Stop, Cube)> = Vec::new();
        let outcome = follow(&wa, i, &wb, budget, Settle::SameAs(va), &mut |s, c| {
            if wb.verdict(s) != va {
                pieces.push((s, c.clone()));
            }
        });
        if outcome.is_err() {
            report.unproven.push(Unproven::A(e.rule_id));
            continue;
        }
        // In the order a breadth-first walk reports them: by B's entry,
        // the policy last, and in region order within one.
        pieces.sort_by_key(|(s, _)| match s {
            Stop::Entry(k) => *k,
            Stop::Policy => usize::MAX,
        });
        for (s, c) in pieces {
            emit(
                &mut report,
                Region::from_cube(c),
                (e.rule_id, va),
                (wb.rule_id(s), wb.verdict(s)),
            );
        }
    }
    // Packets B's entries decide and A's policy does.
    for (j, e) in b.entries.iter().enumerate() {
        let EntryKind::Decide(vb) = &e.kind else {
            continue;
        };
        if *vb == a.policy {
            continue;
        }
        let mut rest = Region::empty();
        let outcome = follow(&wb, j, &wa, budget, Settle::Any, &mut |s, c| {
            if s == Stop::Policy {
                rest.extend_disjoint(Region::from_cube(c.clone()));
            }
        });
        match outcome {
            Ok(()) => emit(&mut report, rest, (0, &a.policy), (e.rule_id, vb)),
            Err(_) => report.unproven.push(Unproven::B(e.rule_id)),
        }
    }
    // Packets both policies decide.
    if a.policy != b.policy {
        let mut rest = Region::empty();
        let both = through(
            &wa,
            space.universe(),
            &wb,
            budget,
            Settle::Any,
            &mut |s, c| {
                if s == Stop::Policy {
                    rest.extend_disjoint(Region::from_cube(c.clone()));
                }
            },
        );
        match both {
            Ok(()) => emit(&mut report, rest, (0, &a.policy), (0, &b.policy)),
            Err(_) => report.unproven.push(Unproven::Policies),
        }
    }
    Ok(report)
}

/// Follows the packets `first`'s entry `i` decides down all of `second`,
/// passing every piece `second` decides (at its stop; the policy's at
/// [`Stop::Policy`]) to `visit`.
fn follow(
    first: &Walker,
    i: usize,
    second: &Walker,
    budget: Budget,
    settle: Settle,
    visit: &mut dyn FnMut(Stop, &Cube),
) -> Result<(), OverBudget> {
    let start = first.universe_within(first.cube(i));
    through_range(first, start, 0, i, second, budget, settle, visit)
}

/// Follows `start` down all of `first`, and what its policy decides down
/// all of `second`, as [`follow`].
fn through(
    first: &Walker,
    start: Region,
    second: &Walker,
    budget: Budget,
    settle: Settle,
    visit: &mut dyn FnMut(Stop, &Cube),
) -> Result<(), OverBudget> {
    let n = first.list.entries.len();
    through_range(first, start, 0, n, second, budget, settle, visit)
}

/// The packets of `start` that pass `first`'s entries `from..to`, piece by
/// piece (depth first, so no working region grows with the list), each
/// followed down `second`.
#[allow(clippy::too_many_arguments)]
fn through_range(
    first: &Walker,
    start: Region,
    from: usize,
    to: usize,
    second: &Walker,
    budget: Budget,
    settle: Settle,
    visit: &mut dyn FnMut(Stop, &Cube),
) -> Result<(), OverBudget> {
    let n = second.list.entries.len();
    let mut inner = Ok(false);
    first
        .search(
            &start,
            from,
            to,
            budget,
            Settle::Any,
            &mut |outcome, cube| {
                if outcome != Outcome::Arrived {
                    return false;
                }
                inner = second.search(
                    &Region::from_cube(cube.clone()),
                    0,
                    n,
                    budget,
                    settle,
                    &mut |o, c| {
                        let s = match o {
                            Outcome::Decided(s) => s,
                            Outcome::Arrived => Stop::Policy,
                        };
                        visit(s, c);
                        false
                    },
                    &mut |_| {},
                );
                inner.is_err()
            },
            &mut |_| {},
        )
        .and(inner)
        .map(|_| ())
}
