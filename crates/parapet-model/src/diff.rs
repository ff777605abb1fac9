//! `parapet diff`: the exact set of packets two decision lists give
//! different verdicts, as disjoint cubes with a witness packet each.
//!
//! The packets are partitioned by who decides them: for every deciding
//! entry of A, its first-match region is walked down B; for every deciding
//! entry of B, its region is walked down A to find the part A's policy
//! decides; and, when the policies differ, what neither list decides. Each
//! piece whose two verdicts differ is a difference.

use crate::flatten::{DecisionList, EntryKind};
use crate::packet::Packet;
use crate::reach::{Settle, Stop, Walker};
use crate::region::{Budget, Cube, Region, Space};
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
    // Packets A's entries decide, walked down B.
    for (i, e) in a.entries.iter().enumerate() {
        let EntryKind::Decide(va) = &e.kind else {
            continue;
        };
        let mut pieces = Vec::new();
        let outcome = wa.reach(i, budget, &mut |_| {}).and_then(|reach| {
            let rest = wb.walk(
                reach,
                0,
                b.entries.len(),
                budget,
                Settle::SameAs(va),
                &mut |s, r| pieces.push((s, r)),
                &mut |_| {},
            )?;
            pieces.push((Stop::Policy, rest));
            Ok(())
        });
        if outcome.is_err() {
            report.unproven.push(Unproven::A(e.rule_id));
            continue;
        }
        for (s, r) in pieces {
            emit(
                &mut report,
                r,
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
        let outcome = wb.reach(j, budget, &mut |_| {}).and_then(|reach| {
            wa.walk(
                reach,
                0,
                a.entries.len(),
                budget,
                Settle::Any,
                &mut |_, _| {},
                &mut |_| {},
            )
        });
        match outcome {
            Ok(r) => emit(&mut report, r, (0, &a.policy), (e.rule_id, vb)),
            Err(_) => report.unproven.push(Unproven::B(e.rule_id)),
        }
    }
    // Packets both policies decide.
    if a.policy != b.policy {
        let both = wa
            .walk(
                space.universe(),
                0,
                a.entries.len(),
                budget,
                Settle::Any,
                &mut |_, _| {},
                &mut |_| {},
            )
            .and_then(|r| {
                wb.walk(
                    r,
                    0,
                    b.entries.len(),
                    budget,
                    Settle::Any,
                    &mut |_, _| {},
                    &mut |_| {},
                )
            });
        match both {
            Ok(r) => emit(&mut report, r, (0, &a.policy), (0, &b.policy)),
            Err(_) => report.unproven.push(Unproven::Policies),
        }
    }
    Ok(report)
}
